"""CUDA_DEVICE_ORDER: the order in which the driver numbers GPUs before CUDA_VISIBLE_DEVICES.

PCI_BUS_ID is ascending PCI bus id, which is nvidia-smi's order. FASTEST_FIRST, the default,
is a descending sort by a speed the driver estimates with an undocumented heuristic
(CVD_RULES rules 15-17); equal GPUs keep PCI order. gputop estimates it like the CUDA
samples' ``gpuGetMaxGflopsDeviceId``: SMs x cores per SM x SM clock. Where GPUs differ, the
result is marked uncertain rather than presented as fact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputop.core.model import GpuSample

PCI_BUS_ID = "PCI_BUS_ID"
FASTEST_FIRST = "FASTEST_FIRST"

# FP32 cores per SM by compute capability (CUDA samples' _ConvertSMVer2Cores).
_CORES_PER_SM = {
    (3, 0): 192, (3, 2): 192, (3, 5): 192, (3, 7): 192,
    (5, 0): 128, (5, 2): 128, (5, 3): 128,
    (6, 0): 64, (6, 1): 128, (6, 2): 128,
    (7, 0): 64, (7, 2): 64, (7, 5): 64,
    (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128, (10, 1): 128, (10, 3): 128,
    (11, 0): 128,
    (12, 0): 128, (12, 1): 128,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class CudaOrder:
    gpus: tuple[GpuSample, ...]
    """GPUs in the order the driver numbers them."""
    fastest_first: bool
    certain: bool
    """False when the fastest-first order had to be estimated for differing GPUs."""
    recognised: bool
    """False for a CUDA_DEVICE_ORDER value the driver does not document."""


def cuda_order(gpus: Sequence[GpuSample], cuda_device_order: str | None) -> CudaOrder:
    by_pci = tuple(sorted(gpus, key=lambda g: (g.pci_bus_id or "", g.physical_index)))
    value = (cuda_device_order or "").strip()
    if value == PCI_BUS_ID:
        return CudaOrder(by_pci, fastest_first=False, certain=True, recognised=True)
    recognised = cuda_device_order is None or value in ("", FASTEST_FIRST)
    if len({_model(g) for g in by_pci}) <= 1:
        return CudaOrder(by_pci, fastest_first=True, certain=True, recognised=recognised)
    speeds = [estimated_speed(g) for g in by_pci]
    if any(speed is None for speed in speeds):
        return CudaOrder(by_pci, fastest_first=True, certain=False, recognised=recognised)
    ranked = sorted(
        range(len(by_pci)), key=lambda i: (-(speeds[i] or 0.0), i)
    )  # stable: equal speeds keep PCI order
    return CudaOrder(
        tuple(by_pci[i] for i in ranked), fastest_first=True, certain=False, recognised=recognised
    )


def estimated_speed(gpu: GpuSample) -> float | None:
    """SMs x FP32 cores per SM x max SM clock: the CUDA samples' "max GFLOPS" key."""
    if gpu.compute_capability is None or gpu.multiprocessor_count is None:
        return None
    cores = _CORES_PER_SM.get(gpu.compute_capability)
    if cores is None:
        cores = 128 if gpu.compute_capability[0] >= 9 else 64
    clock = gpu.max_clocks.sm_mhz or gpu.max_clocks.graphics_mhz or 1000
    return float(gpu.multiprocessor_count * cores * clock)


def _model(gpu: GpuSample) -> tuple[object, ...]:
    return (gpu.name, gpu.compute_capability, gpu.multiprocessor_count, gpu.max_clocks.sm_mhz)
