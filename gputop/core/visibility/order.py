"""CUDA_DEVICE_ORDER: the order in which the driver numbers GPUs before CUDA_VISIBLE_DEVICES.

PCI_BUS_ID is ascending PCI bus id, which is nvidia-smi's order. FASTEST_FIRST, the default,
is a descending sort by a speed the driver estimates with an undocumented heuristic
(docs/cuda-visibility.md, rules 15-17); equal GPUs keep PCI order. Where the driver probe
could run, its answer with both variables unset *is* that order (``driver_order``). Only
where it could not does gputop estimate it like the CUDA samples' ``gpuGetMaxGflopsDeviceId``
(SMs x cores per SM x SM clock) and mark the result uncertain rather than present it as fact.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputop.core.model import GpuSample
from gputop.core.records import frozen

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


@frozen
class CudaOrder:
    gpus: tuple[GpuSample, ...]
    """GPUs in the order the driver numbers them."""
    fastest_first: bool
    certain: bool
    """False when the fastest-first order had to be estimated for differing GPUs."""
    recognised: bool
    """False for a CUDA_DEVICE_ORDER value the driver does not document."""
    from_driver: bool = False
    """True when the fastest-first order is the driver probe's answer, not an estimate."""


def cuda_order(
    gpus: Sequence[GpuSample],
    cuda_device_order: str | None,
    driver_order: Sequence[str] | None = None,
) -> CudaOrder:
    """The GPUs as the driver numbers them under ``cuda_device_order``.

    ``driver_order`` is the UUID of each CUDA ordinal from a driver probe run with both
    CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER unset; without it FASTEST_FIRST is estimated.
    """
    by_pci = tuple(sorted(gpus, key=lambda g: (g.pci_bus_id or "", g.physical_index)))
    value = (cuda_device_order or "").strip()
    if value == PCI_BUS_ID:
        return CudaOrder(by_pci, fastest_first=False, certain=True, recognised=True)
    recognised = cuda_device_order is None or value in ("", FASTEST_FIRST)
    if driver_order is not None:
        from_driver = _from_driver(by_pci, driver_order, recognised)
        if from_driver is not None:
            return from_driver
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


def _from_driver(
    by_pci: tuple[GpuSample, ...], driver_order: Sequence[str], recognised: bool
) -> CudaOrder | None:
    """The driver's numbering, where it names every GPU that is not in MIG mode.

    A MIG-mode GPU appears in the driver's list through its MIG devices' UUIDs (or not at
    all, before R570 or without instances); it takes the place of its first instance, or
    goes last in PCI order. A GPU the driver does not list and that is not in MIG mode means
    the two views differ (a device cgroup, say): then the answer is not used.
    """
    position: dict[str, int] = {}
    for ordinal, uuid in enumerate(driver_order):
        position.setdefault(_hex(uuid), ordinal)
    places: list[tuple[int, int]] = []
    for pci_rank, gpu in enumerate(by_pci):
        keys = [_hex(gpu.uuid or "")] + [_hex(m.uuid or "") for m in gpu.mig_devices]
        found = [position[k] for k in keys if k and k in position]
        if found:
            places.append((min(found), pci_rank))
        elif gpu.mig_mode_current:
            places.append((len(driver_order) + pci_rank, pci_rank))
        else:
            return None
    ranked = tuple(by_pci[rank] for _, rank in sorted(places))
    return CudaOrder(
        ranked, fastest_first=True, certain=True, recognised=recognised, from_driver=True
    )


def _hex(uuid: str) -> str:
    """The UUID without its ``GPU-``/``MIG-`` prefix: the driver gives MIG UUIDs as GPU-."""
    return uuid.split("-", 1)[-1].lower() if "-" in uuid else ""


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
