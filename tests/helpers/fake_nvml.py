"""Scenarios and a factory for the fake NVML tests: one GPU with every field, and variants."""

from __future__ import annotations

from typing import Any

from gputop.core.fake import FakeNvml
from gputop.core.fake.nvml import FakeDeviceHandle
from gputop.core.fake.scenario import parse_scenario

MIB = 1024 * 1024
NOT_ON_MIG = 0xFFFFFFFF
START = 1767225600.0
UUID_0 = "GPU-5a9e5b38-bd6d-2f23-3b22-d42f6e26aa55"
UUID_1 = "GPU-0c4e3a71-5b8d-4f1e-9a2c-7d6b5e4f3a21"
MIG_UUIDS = (
    "MIG-1f2e3d4c-5b6a-4789-8a9b-0c1d2e3f4a5b",
    "MIG-2f2e3d4c-5b6a-4789-8a9b-0c1d2e3f4a5b",
)

FULL_GPU: dict[str, Any] = {
    "name": "NVIDIA A100-SXM4-80GB",
    "uuid": UUID_0,
    "pci_bus_id": "00000000:1B:00.0",
    "serial": "1320000000001",
    "memory_total_mib": 81920,
    "memory_used_mib": 1000,
    "power_limit_w": 400,
    "max_clocks_mhz": {"graphics": 1410, "sm": 1411, "mem": 1593, "video": 1275},
    "cuda_compute_capability": [8, 0],
    "multiprocessor_count": 108,
    "performance_state": 2,
    "persistence_mode": True,
    "display_active": False,
    "compute_mode": 3,
    "ecc_uncorrected_volatile": 4,
    "bar1_total_mib": 131072,
    "bar1_used_mib": 3,
    "nvlink_count": 12,
    "utilization_gpu": 77,
    "utilization_memory": 33,
    "temperature_c": 61,
    "power_w": 250.5,
    "fan_percent": 45,
    "clocks_mhz": {"graphics": 1300, "sm": 1305, "mem": 1593, "video": 1100},
    "pcie_tx_kbps": 1200,
    "pcie_rx_kbps": 3400,
    "encoder_util": 5,
    "decoder_util": 6,
    "nvlink_tx_kbps": 900,
    "nvlink_rx_kbps": 800,
    "processes": [
        {"pid": 4200001, "type": "C", "used_memory_mib": 700, "sm_util": 60, "mem_util": 20,
         "user": "alice", "cmd": ["python", "train.py"], "cpu_percent": 99.5,
         "host_memory_mib": 2048, "started_s_ago": 3600},
        {"pid": 4200002, "type": "G", "used_memory_mib": 50, "user": "root", "cmd": ["Xorg"]},
        {"pid": 4200003, "type": "C+G", "used_memory_mib": None, "sm_util": 5},
    ],
}  # fmt: skip

SECOND_GPU: dict[str, Any] = {**FULL_GPU, "uuid": UUID_1, "pci_bus_id": "00000000:2A:00.0"}

BARE_GPU: dict[str, Any] = {"name": "Tesla K80", "uuid": UUID_1}

MIG_GPU: dict[str, Any] = {
    "name": "NVIDIA A100-SXM4-80GB",
    "uuid": UUID_1,
    "memory_total_mib": 81920,
    "multiprocessor_count": 98,
    "temperature_c": 40,
    "mig_mode": [1, 1],
    "mig_devices": [
        {"uuid": MIG_UUIDS[0], "gpu_instance_id": 2, "compute_instance_id": 0,
         "profile": "3g.40gb", "memory_total_mib": 40192, "memory_used_mib": 1024,
         "multiprocessor_count": 42,
         "processes": [{"pid": 4200010, "used_memory_mib": 900, "sm_util": 70}]},
        {"uuid": MIG_UUIDS[1], "gpu_instance_id": 9, "compute_instance_id": 0,
         "profile": "1g.10gb", "memory_total_mib": 9728, "memory_used_mib": 0,
         "multiprocessor_count": 14,
         "processes": [{"pid": 4200011, "used_memory_mib": 300}]},
    ],
}  # fmt: skip


def make_nvml(
    *gpus: dict[str, Any], at: float | None = 10.0, init: bool = True, **top: Any
) -> FakeNvml:
    document = {"driver_version": "550.127.05", "cuda_driver_version": 12040, **top}
    document["gpus"] = list(gpus) or [FULL_GPU]
    nvml = FakeNvml(parse_scenario(document, "test.json"), frozen_time=at)
    if init:
        nvml.nvmlInit()
    return nvml


def first_handle(nvml: FakeNvml) -> FakeDeviceHandle:
    return nvml.nvmlDeviceGetHandleByIndex(0)
