"""Which processes use a GPU, as NVML lists them.

NVML keeps compute and graphics processes in separate lists and has versioned calls for
each (``_v3`` since R510, ``_v2`` since R470, unversioned before); the newest the driver
has is used. Per-process SM utilisation comes from a sample buffer that NVML fills on its
own schedule, so the last seen timestamp is kept per GPU and the last samples are reused
until newer ones arrive.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gputop.core.model import MigDevice, ProcessType
from gputop.core.nvml_fields import FieldReader

COMPUTE_CALLS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
)
GRAPHICS_CALLS = (
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses",
)
NO_INSTANCE = 0xFFFFFFFF
"""NVML's instance id for a process that is not on a MIG device."""


@dataclass(frozen=True, slots=True)
class NvmlProcess:
    """One process as NVML reports it, before the host adds what it knows."""

    pid: int
    type: ProcessType
    used_memory_bytes: int | None
    mig_uuid: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


def list_processes(
    reader: FieldReader, handle: Any, mig_devices: tuple[MigDevice, ...], mig_handles: list[Any]
) -> tuple[tuple[NvmlProcess, ...], bool]:
    """The processes on one GPU, merged across the compute and graphics lists.

    The flag says whether NVML listed the compute processes: when it refuses (no
    permission, not supported), the GPU's processes are unknown, not absent, even if the
    graphics list came through. On a GPU in MIG mode, processes carry the MIG device they
    run on; when the parent GPU will not list them, each MIG device is asked instead.
    """
    compute = reader.read_first(COMPUTE_CALLS, handle)
    graphics = reader.read_first(GRAPHICS_CALLS, handle)
    if compute is None and mig_handles:
        per_instance = [reader.read_first(COMPUTE_CALLS, mig) for mig in mig_handles]
        if any(entries is not None for entries in per_instance):
            compute = [entry for entries in per_instance for entry in entries or ()]
    by_instance = {(m.gpu_instance_id, m.compute_instance_id): m for m in mig_devices}
    merged: dict[tuple[int, int | None, int | None], NvmlProcess] = {}
    for kind, entries in ((ProcessType.COMPUTE, compute), (ProcessType.GRAPHICS, graphics)):
        for entry in entries or ():
            process = _from_nvml(entry, kind, by_instance)
            key = (process.pid, process.gpu_instance_id, process.compute_instance_id)
            earlier = merged.get(key)
            if earlier is not None and earlier.type is not kind:
                process = _combined(earlier, process)
            merged[key] = process
    return tuple(merged.values()), compute is not None


def _from_nvml(
    entry: Any, kind: ProcessType, by_instance: dict[tuple[int | None, int | None], MigDevice]
) -> NvmlProcess:
    gi = _instance_id(getattr(entry, "gpuInstanceId", NO_INSTANCE))
    ci = _instance_id(getattr(entry, "computeInstanceId", NO_INSTANCE))
    mig = by_instance.get((gi, ci)) if gi is not None else None
    used = entry.usedGpuMemory
    return NvmlProcess(
        pid=int(entry.pid),
        type=kind,
        used_memory_bytes=None if used is None or used >= 2**64 - 1 else int(used),
        mig_uuid=mig.uuid if mig is not None else None,
        gpu_instance_id=gi,
        compute_instance_id=ci,
    )


def _instance_id(value: Any) -> int | None:
    return None if value is None or int(value) == NO_INSTANCE else int(value)


def _combined(first: NvmlProcess, second: NvmlProcess) -> NvmlProcess:
    """A process in both lists is nvidia-smi's "C+G"; its memory is counted once."""
    used = first.used_memory_bytes
    if used is None:
        used = second.used_memory_bytes
    return NvmlProcess(
        pid=first.pid,
        type=ProcessType.COMPUTE_GRAPHICS,
        used_memory_bytes=used,
        mig_uuid=first.mig_uuid,
        gpu_instance_id=first.gpu_instance_id,
        compute_instance_id=first.compute_instance_id,
    )


@dataclass(frozen=True, slots=True)
class ProcessUtilization:
    sm_percent: int | None
    memory_percent: int | None


class ProcessUtilizationTracker:
    """Per-process SM and memory utilisation from NVML's sample buffer, for one GPU."""

    def __init__(self) -> None:
        self._last_timestamp_us = 0
        self._latest: dict[int, ProcessUtilization] = {}

    def read(
        self, reader: FieldReader, handle: Any, pids: Iterable[int]
    ) -> dict[int, ProcessUtilization]:
        """The newest sample per pid, keeping older samples while NVML has none newer."""
        samples = reader.read("nvmlDeviceGetProcessUtilization", handle, self._last_timestamp_us)
        if samples:
            newest: dict[int, tuple[int, ProcessUtilization]] = {}
            for sample in samples:
                stamp = int(sample.timeStamp)
                pid = int(sample.pid)
                if pid not in newest or stamp >= newest[pid][0]:
                    newest[pid] = (stamp, ProcessUtilization(sample.smUtil, sample.memUtil))
                self._last_timestamp_us = max(self._last_timestamp_us, stamp)
            self._latest.update({pid: value for pid, (_, value) in newest.items()})
        wanted = set(pids)
        self._latest = {pid: u for pid, u in self._latest.items() if pid in wanted}
        return dict(self._latest)
