"""Which processes use a GPU, as NVML lists them, and how busy each is.

The compute, graphics and MPS-client lists are read with gputop's own structs
(nvml_running.py). Entries with an impossible pid (0, or 2**31 and above) are dropped and
counted: the driver wrote a layout gputop did not expect, and they must never reach psutil
or a signal. Per-process SM % is asked of the R550 call first (there a process without a
sample is unknown, never 0), else of the older sample buffer over the last
``SAMPLE_WINDOW_S``, where a process without a sample reads 0 (docs/activity.md).
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from gputop.core.model import MigDevice, ProcessType
from gputop.core.numbers import MAX_PID
from gputop.core.nvml_layouts import (
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_SUCCESS,
    UTILIZATION_INFO_V1,
    ProcessesUtilizationInfoV1,
    ProcessUtilizationInfoV1,
)
from gputop.core.records import frozen
from gputop.core.sampling.nvml_fields import FieldReader, GpuLostError
from gputop.core.sampling.nvml_running import (
    ATTEMPTS,
    COMPUTE,
    ENTRIES_MAX,
    GRAPHICS,
    MPS,
    DriverSymbols,
    ListCall,
    RawProcess,
    call_list,
    choose_call,
    made_room,
    offered,
)

SAMPLE_WINDOW_S = 1.0
"""How far back process samples are asked for: NVML samples about every 1/6 s on busy GPUs."""


class NvmlProcess(NamedTuple):
    """One process as NVML reports it, before the host adds what it knows. (A named tuple,
    as ``ProcessUtilization``: one of each is made for every GPU process at every refresh,
    where a frozen dataclass's ``__init__`` costs several times as much.)"""

    pid: int
    type: ProcessType
    used_memory_bytes: int | None
    mig_uuid: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@frozen
class ProcessListing:
    """One GPU's processes, whether NVML listed them, and how many entries were dropped."""

    processes: tuple[NvmlProcess, ...]
    listed: bool
    """Whether NVML listed the compute processes: when it refuses (no permission, not
    supported), the GPU's processes are unknown, not absent."""
    dropped: int = 0


class ProcessLister:
    """Lists processes on the driver it was made for; chooses the calls once."""

    def __init__(self, nvml: Any, driver_version: str | None) -> None:
        self._nvml = nvml
        self._symbols = DriverSymbols(nvml)
        self._calls: dict[str, ListCall | None] = {
            base: choose_call(self._symbols, base, driver_version)
            for base in (COMPUTE, GRAPHICS, MPS)
        }

    @property
    def symbols(self) -> DriverSymbols:
        return self._symbols

    def call_for(self, base: str) -> ListCall | None:
        """The call and layout chosen for list ``base`` (tests and diagnostics)."""
        return self._calls[base]

    def list_gpu(
        self, handle: Any, mig_devices: tuple[MigDevice, ...], mig_handles: list[Any]
    ) -> ProcessListing:
        """The processes on one GPU, merged across the compute, graphics and MPS lists.

        On a GPU in MIG mode, processes carry the MIG device they run on; when the parent
        GPU will not list them, each MIG device is asked instead.
        """
        compute = self._read(COMPUTE, handle)
        mps = self._read(MPS, handle)
        graphics = self._read(GRAPHICS, handle)
        if compute is None and mig_handles:
            compute = self._per_instance(COMPUTE, mig_handles)
        if mps is None and mig_handles:
            mps = self._per_instance(MPS, mig_handles)
        by_instance = {(m.gpu_instance_id, m.compute_instance_id): m for m in mig_devices}
        merged: dict[tuple[int, int | None, int | None], NvmlProcess] = {}
        dropped = 0
        for kind, entries in (
            (ProcessType.COMPUTE, compute),
            (ProcessType.GRAPHICS, graphics),
            (ProcessType.MPS_CLIENT, mps),
        ):
            for pid, used, gi, ci in entries or ():
                if not 0 < pid <= MAX_PID:
                    dropped += 1
                    continue
                mig = by_instance.get((gi, ci)) if gi is not None else None
                process = NvmlProcess(
                    pid, kind, used, mig.uuid if mig is not None else None, gi, ci
                )
                key = (pid, gi, ci)
                earlier = merged.get(key)
                if earlier is not None and earlier.type is not kind:
                    process = _combined(earlier, process)
                merged[key] = process
        return ProcessListing(tuple(merged.values()), compute is not None, dropped)

    def _read(self, base: str, handle: Any) -> list[RawProcess] | None:
        call = self._calls[base]
        if call is None:
            return None
        nvml = self._nvml
        try:
            return call_list(self._symbols, call, handle, nvml.NVMLError)
        except nvml.NVMLError_GpuIsLost as error:
            raise GpuLostError(call.symbol) from error
        except Exception:  # a refused or broken list is "not listed"
            return None

    def _per_instance(self, base: str, mig_handles: list[Any]) -> list[RawProcess] | None:
        per_instance = [self._read(base, mig) for mig in mig_handles]
        if all(entries is None for entries in per_instance):
            return None
        return [entry for entries in per_instance for entry in entries or ()]


def _combined(first: NvmlProcess, second: NvmlProcess) -> NvmlProcess:
    """A process in two lists: compute and graphics is nvidia-smi's "C+G"; an MPS client
    stays one whatever else lists it. Its memory is counted once."""
    used = first.used_memory_bytes
    if used is None:
        used = second.used_memory_bytes
    if ProcessType.MPS_CLIENT in (first.type, second.type):
        kind = ProcessType.MPS_CLIENT
    else:
        kind = ProcessType.COMPUTE_GRAPHICS
    return NvmlProcess(
        pid=first.pid,
        type=kind,
        used_memory_bytes=used,
        mig_uuid=first.mig_uuid,
        gpu_instance_id=first.gpu_instance_id,
        compute_instance_id=first.compute_instance_id,
    )


class ProcessUtilization(NamedTuple):
    sm_percent: int | None
    memory_percent: int | None


IDLE = ProcessUtilization(0, 0)
_plain_get = object.__getattribute__
"""A field of a ctypes structure, without a subclass's ``__getattribute__``."""
INFO_CALL = "nvmlDeviceGetProcessesUtilizationInfo"
"""R550 and newer; absent from nvidia-ml-py before 12.550 (docs/activity.md)."""


_INFO_SAMPLE = struct.Struct("=QIII20x")
"""A sample's time stamp, pid, SM % and memory % (the codec figures after them skipped)."""
_INFO_BINDING_STRUCT = "c_nvmlProcessesUtilizationInfo_v1_t"
"""What nvidia-ml-py defines with the call (12.550 and later)."""


def _info_call(
    function: Any, error: Callable[[int], Exception], room: dict[tuple[str, int], int]
) -> Callable[[Any, int], list[tuple[int, int, int, int]]]:
    """``nvmlDeviceGetProcessesUtilizationInfo`` made through the driver's symbol, as the
    binding's wrapper makes it (a call for the count, then one with an array), with room to
    grow and a retry as for the process lists, its samples read from the array's bytes in
    one pass: (time stamp, pid, SM %, memory %) each. ``room``: as for the process lists
    (``DriverSymbols.room``), the array the last call made room for is offered at once."""

    def call(handle: Any, since_us: int) -> list[tuple[int, int, int, int]]:
        key = (INFO_CALL, id(handle))
        had = capacity = room.get(key, 0)
        samples: Any = (ProcessUtilizationInfoV1 * capacity)() if capacity else None
        info = ProcessesUtilizationInfoV1(
            UTILIZATION_INFO_V1, capacity, since_us, ctypes.addressof(samples) if capacity else None
        )
        for _attempt in range(ATTEMPTS + (1 if capacity else 0)):
            result = int(function(handle, ctypes.byref(info)))
            if result == NVML_SUCCESS:
                if samples is None:
                    return []
                count = min(int(info.processSamplesCount), capacity)
                offered(room, key, had, count)
                data = ctypes.string_at(samples, count * _INFO_SAMPLE.size)
                return list(_INFO_SAMPLE.iter_unpack(data))
            if result != NVML_ERROR_INSUFFICIENT_SIZE:
                raise error(result)
            if int(info.processSamplesCount) > ENTRIES_MAX:
                raise error(result)
            capacity = int(info.processSamplesCount) * 2 + 5
            samples = (ProcessUtilizationInfoV1 * capacity)()
            info.processSamplesCount = capacity
            info.procUtilArray = ctypes.addressof(samples)
            made_room(room, key, capacity)
        raise error(NVML_ERROR_INSUFFICIENT_SIZE)

    return call


def read_utilization(
    reader: FieldReader,
    handle: Any,
    pids: Iterable[int],
    now_s: float,
    symbols: DriverSymbols | None = None,
) -> dict[int, ProcessUtilization]:
    """SM and memory utilisation of each of ``pids`` over the last ``SAMPLE_WINDOW_S``.

    With ``nvmlDeviceGetProcessesUtilizationInfo`` a process without a sample is unknown
    (left out). With the older call a process without a sample in the window was idle and
    reads 0, and NOT_FOUND (no process ran) reads 0 for all. Any other failure of both (not
    supported) leaves every process unknown. The R550 call is asked where the binding has
    it (nvidia-ml-py 12.550 and later); with ``symbols`` and the driver's symbol found, it
    is made through the symbol (``_info_call``), else through the binding's wrapper.
    """
    since_us = max(0, int((now_s - SAMPLE_WINDOW_S) * 1_000_000))
    absent: ProcessUtilization | None = IDLE
    samples = None
    if reader.has(INFO_CALL):
        direct = _direct_info_call(reader, symbols)
        if direct is not None:
            rows = reader.call(INFO_CALL, direct, handle, since_us, not_found=())
            if rows is not None:
                return _newest(rows, pids, None)
        else:
            samples = reader.read(INFO_CALL, handle, since_us, not_found=())
        absent = None
    if samples is None:
        absent = IDLE
        samples = reader.read("nvmlDeviceGetProcessUtilization", handle, since_us, not_found=())
    if samples is None:
        return {}
    newest: dict[int, tuple[int, ProcessUtilization]] = {}
    try:
        for sample in samples:
            # pynvml's structures read every field through a Python __getattribute__ (it
            # decodes bytes, which these integer fields never are): read them plainly
            get = _plain_get if isinstance(sample, ctypes.Structure) else getattr
            stamp, pid = int(get(sample, "timeStamp")), int(get(sample, "pid"))
            if pid not in newest or stamp >= newest[pid][0]:
                newest[pid] = (
                    stamp,
                    ProcessUtilization(int(get(sample, "smUtil")), int(get(sample, "memUtil"))),
                )
    except (TypeError, ValueError, OverflowError, AttributeError):
        return {}
    if absent is None:
        return {pid: newest[pid][1] for pid in pids if pid in newest}
    return {pid: newest[pid][1] if pid in newest else absent for pid in pids}


def _direct_info_call(
    reader: FieldReader, symbols: DriverSymbols | None
) -> Callable[[Any, int], list[tuple[int, int, int, int]]] | None:
    """The R550 call through the driver's symbol, where the binding has the call and the
    driver the symbol; ``None`` where the binding's own function is to be asked."""
    if symbols is None or reader.binding_lacks(INFO_CALL, _INFO_BINDING_STRUCT):
        return None
    function = symbols.get(INFO_CALL)
    return None if function is None else _info_call(function, reader.error_for, symbols.room)


def _newest(
    rows: list[tuple[int, int, int, int]], pids: Iterable[int], absent: ProcessUtilization | None
) -> dict[int, ProcessUtilization]:
    """Each of ``pids``'s newest sample of ``rows`` ((time stamp, pid, SM %, memory %) each);
    ``absent`` for one without."""
    newest: dict[int, tuple[int, int, int]] = {}
    for stamp, pid, sm, memory in rows:
        earlier = newest.get(pid)
        if earlier is None or stamp >= earlier[0]:
            newest[pid] = (stamp, sm, memory)
    result: dict[int, ProcessUtilization] = {}
    for pid in pids:
        found = newest.get(pid)
        if found is not None:
            result[pid] = ProcessUtilization(found[1], found[2])
        elif absent is not None:
            result[pid] = absent
    return result
