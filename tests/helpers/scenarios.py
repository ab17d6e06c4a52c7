"""Scenario documents for tests that change one thing of a machine (docs/scenario.md)."""

from __future__ import annotations

from typing import Any


def minimal_gpu(**overrides: Any) -> dict[str, Any]:
    """One GPU with every reading present, for scenarios that change one thing."""
    gpu: dict[str, Any] = {
        "name": "NVIDIA A100-SXM4-40GB",
        "uuid": "GPU-11111111-aaaa-bbbb-cccc-000000000000",
        "pci_bus_id": "00000000:07:00.0",
        "memory_total_mib": 40960,
        "memory_used_mib": 1024,
        "utilization_gpu": 50,
        "utilization_memory": 20,
        "temperature_c": 40,
        "power_w": 100,
        "power_limit_w": 400,
        "fan_percent": 30,
        "clocks_mhz": {"graphics": 1410, "sm": 1410, "mem": 1215, "video": 1275},
        "max_clocks_mhz": {"graphics": 1410, "sm": 1410, "mem": 1215, "video": 1275},
        "cuda_compute_capability": [8, 0],
        "multiprocessor_count": 108,
        "performance_state": 0,
        "processes": [],
    }
    gpu.update(overrides)
    return gpu
