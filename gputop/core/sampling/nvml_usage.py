"""Readings for what a job used, beyond a snapshot: the energy counter and accounting.

Asked by a job's supervisor (gputop.core.jobs.usage_meter) through the same backend as every
sample; each answer is range-checked here, where it enters, and anything NVML cannot give
(an old board, a lost card, accounting off) is ``None``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputop.core.numbers import MAX_MEMORY_BYTES, whole_within
from gputop.core.sampling.nvml_fields import GpuLostError

if TYPE_CHECKING:
    from gputop.core.sampling.nvml_backend import NvmlBackend

MAX_ENERGY_MJ = 2**63
NVML_FEATURE_ENABLED = 1


def energy_mj(backend: NvmlBackend, physical_index: int) -> int | None:
    """The card's energy counter (millijoules since the driver loaded), or ``None``."""
    value = _read(backend, physical_index, "nvmlDeviceGetTotalEnergyConsumption")
    return value if whole_within(value, 0, MAX_ENERGY_MJ) else None


def accounting_on(backend: NvmlBackend, physical_index: int) -> bool:
    """The driver's accounting mode is on for the card (off or unknown: False)."""
    return _read(backend, physical_index, "nvmlDeviceGetAccountingMode") == NVML_FEATURE_ENABLED


def accounted_peak_bytes(backend: NvmlBackend, physical_index: int, pid: int) -> int | None:
    """The driver's exact peak memory of ``pid`` on the card (accounting mode on), or None."""
    stats = _read(backend, physical_index, "nvmlDeviceGetAccountingStats", pid)
    value = getattr(stats, "maxMemoryUsage", None)
    return value if whole_within(value, 0, MAX_MEMORY_BYTES) else None


def _read(backend: NvmlBackend, physical_index: int, function: str, *args: object) -> object:
    handle = backend.device_handle(physical_index)
    if handle is None:
        return None
    try:
        return backend.reader.read(function, handle, *args)
    except GpuLostError:
        return None
