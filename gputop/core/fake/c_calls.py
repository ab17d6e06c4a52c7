"""The simulated driver's C symbols: ``_nvmlGetFunctionPointer``, the process lists and the
R550 per-process utilisation.

gputop calls the running-process lists in C (core/sampling/nvml_running.py), because the
entry layout depends on the driver, so the fake answers those symbols in the C convention
(``fn(handle, unsigned *count, entries)``), writing entries in the layout of the simulated
driver generation (nvml_layouts.py; docs/scenario.md, "Driver generations").
``nvmlDeviceGetProcessesUtilizationInfo`` (R550+) is answered the same way, with the sizing
the binding's wrapper relies on (a first call gets the count and INSUFFICIENT_SIZE).
"""

from __future__ import annotations

import ctypes
import functools
import re
from collections.abc import Callable
from typing import Any

import pynvml

from gputop.core.fake.base import nvml_error
from gputop.core.fake.process_calls import ProcessCalls
from gputop.core.fake.scenario_types import ScenarioProcess
from gputop.core.nvml_layouts import (
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_SUCCESS,
    UTILIZATION_INFO_V1,
    ProcessesUtilizationInfoV1,
    ProcessInfoV1,
    ProcessInfoV2,
    ProcessInfoV3Wide,
    ProcessUtilizationInfoV1,
)

NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
UTILIZATION_INFO = "nvmlDeviceGetProcessesUtilizationInfo"
UTILIZATION_INFO_DRIVER = 550
"""The first driver branch that exports ``nvmlDeviceGetProcessesUtilizationInfo``."""


_LISTS = {
    "nvmlDeviceGetComputeRunningProcesses": "compute",
    "nvmlDeviceGetGraphicsRunningProcesses": "graphics",
    "nvmlDeviceGetMPSComputeRunningProcesses": "mps",
}
_PROCESS_SYMBOLS = {
    base + suffix: (kind, suffix) for base, kind in _LISTS.items() for suffix in ("", "_v2", "_v3")
}
_OTHER_SYMBOLS = frozenset(
    {
        "nvmlInit_v2",
        "nvmlDeviceGetCount_v2",
        "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetPciInfo_v3",
        "nvmlDeviceGetMemoryInfo_v2",
    }
)
"""Versioned symbols whose pynvml function has another name; exported unless missing."""


class DriverBufferOverrun(RuntimeError):
    """The caller's buffer is smaller than the entries the driver would write into it.

    A real driver would write past the end and corrupt memory; the simulation refuses.
    """


class CCalls(ProcessCalls):
    """``_nvmlGetFunctionPointer`` and the C-convention process-list symbols."""

    def _nvmlGetFunctionPointer(self, name: str) -> Callable[..., Any]:
        """The symbol ``name`` of the simulated driver, as the binding's lookup gives it.

        Raises FUNCTION_NOT_FOUND for a symbol the simulated driver generation lacks
        (``missing_functions``) or that the fake does not simulate, UNINITIALIZED before
        ``nvmlInit`` (the binding has no library loaded then).
        """
        if self._init_count == 0:
            nvml_error(pynvml.NVML_ERROR_UNINITIALIZED)
        if name in self._scenario.missing_functions:
            nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if name in _PROCESS_SYMBOLS:
            kind, suffix = _PROCESS_SYMBOLS[name]
            return functools.partial(self._c_running, name, kind, self._entry_layout(suffix))
        if name == UTILIZATION_INFO:
            if self._driver_before(UTILIZATION_INFO_DRIVER):
                nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            return self._c_utilization_info
        if name in _OTHER_SYMBOLS or callable(getattr(type(self), name, None)):
            return functools.partial(_pynvml_level_only, name)
        nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    def _entry_layout(self, suffix: str) -> type[ctypes.Structure]:
        if suffix == "":
            return ProcessInfoV1
        if suffix == "_v3" and _writes_wide_v3(self._scenario.driver_version):
            return ProcessInfoV3Wide
        return ProcessInfoV2

    def _c_running(
        self,
        symbol: str,
        kind: str,
        layout: type[ctypes.Structure],
        handle: Any,
        count: Any,
        entries: Any,
    ) -> int:
        """``nvmlReturn_t fn(nvmlDevice_t, unsigned int *count, nvmlProcessInfo_t *infos)``."""
        try:
            self._check_call(symbol)
            self._check_device(symbol, handle, allow_mig=True)
        except pynvml.NVMLError as error:
            return int(error.value)
        listed = self._memo(
            ("listed", handle, kind),
            lambda: [p for p in self._processes(handle) if _in_list(p[0], kind)],
        )
        capacity = int(count.contents.value)
        count.contents.value = len(listed)
        if not listed:
            return NVML_SUCCESS
        if entries is None or capacity < len(listed):
            return NVML_ERROR_INSUFFICIENT_SIZE
        if ctypes.sizeof(entries) < ctypes.sizeof(layout) * len(listed):
            raise DriverBufferOverrun(
                f"{symbol}: {len(listed)} entries of {ctypes.sizeof(layout)} bytes do not fit "
                f"the caller's {ctypes.sizeof(entries)}-byte buffer"
            )
        written = (layout * len(listed)).from_buffer(entries)
        shares = self._memory_shares(handle, self.reading_time())  # card_load.py
        for slot, (process, ids) in zip(written, listed, strict=True):
            gpu_instance_id, compute_instance_id = ids
            slot.pid = process.pid
            memory = shares[(ids, process.pid)]
            slot.usedGpuMemory = memory if memory is not None else 2**64 - 1
            if layout is not ProcessInfoV1:
                slot.gpuInstanceId = gpu_instance_id
                slot.computeInstanceId = compute_instance_id
        return NVML_SUCCESS

    def nvmlDeviceGetProcessesUtilizationInfo(self, handle: Any, timeStamp: int) -> list[Any]:
        """The binding's wrapper (nvidia-ml-py 12.550 and later) over the simulated symbol:
        a call for the count, then one with an array that size. With an older binding
        installed the function is not there: FUNCTION_NOT_FOUND, as for any call the fake
        does not have."""
        struct = getattr(pynvml, "c_nvmlProcessesUtilizationInfo_v1_t", None)
        entry = getattr(pynvml, "c_nvmlProcessUtilizationInfo_v1_t", None)
        if struct is None or entry is None:
            nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        info = struct()
        info.version = pynvml.ProcessesUtilizationInfo_v1
        info.processSamplesCount = 0
        info.lastSeenTimeStamp = timeStamp
        fn = self._nvmlGetFunctionPointer(UTILIZATION_INFO)
        code = fn(handle, ctypes.byref(info))
        if code != NVML_ERROR_INSUFFICIENT_SIZE:
            nvml_error(code)
        samples = (entry * info.processSamplesCount)()
        info.procUtilArray = samples
        code = fn(handle, ctypes.byref(info))
        if code != NVML_SUCCESS:
            nvml_error(code)
        return samples[0 : info.processSamplesCount]

    def _c_utilization_info(self, handle: Any, info_ref: Any) -> int:
        """``nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t,
        nvmlProcessesUtilizationInfo_t *)``, as the R550 driver and the C imitation answer it.

        Every process with an SM reading in the scenario has a sample (0 when idle), stamped
        with the current one-second sample and given only if newer than
        ``lastSeenTimeStamp``; a process without an SM reading has none (gputop must read it
        as unknown). No sample at all is NOT_FOUND.
        """
        try:
            self._check_call(UTILIZATION_INFO)
            self._check_device(UTILIZATION_INFO, handle, allow_mig=True)
        except pynvml.NVMLError as error:
            return int(error.value)
        info = _pointed_at(info_ref, ProcessesUtilizationInfoV1)
        if info is None:
            return int(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if info.version != UTILIZATION_INFO_V1:
            return NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        measured = self._measured(handle)
        sample_t = self.sample_time()
        stamp = round(self._epoch_at(sample_t) * 1_000_000)
        if not measured or stamp <= info.lastSeenTimeStamp:
            return int(pynvml.NVML_ERROR_NOT_FOUND)
        if not info.procUtilArray or info.processSamplesCount < len(measured):
            info.processSamplesCount = len(measured)
            return NVML_ERROR_INSUFFICIENT_SIZE
        shares = self._time_shares(handle, sample_t)  # the card's time (card_load.py)
        layout = ProcessUtilizationInfoV1 * len(measured)
        ctypes.memset(info.procUtilArray, 0, ctypes.sizeof(layout))  # every slot at once
        array = layout.from_address(info.procUtilArray)
        for slot, (process, ids) in zip(array, measured, strict=True):
            slot.pid = process.pid
            slot.timeStamp = stamp
            slot.smUtil, slot.memUtil = shares[(ids, process.pid)]
        info.processSamplesCount = len(measured)
        return NVML_SUCCESS


def _pointed_at(reference: Any, layout: type[ctypes.Structure]) -> Any | None:
    """The struct a C caller passed (``byref(s)`` or ``pointer(s)``), read as ``layout``."""
    target = getattr(reference, "_obj", None)
    if target is None:
        try:
            target = reference.contents
        except (AttributeError, ValueError):
            return None
    if ctypes.sizeof(target) < ctypes.sizeof(layout):
        return None
    return layout.from_address(ctypes.addressof(target))


def _in_list(process: ScenarioProcess, kind: str) -> bool:
    if kind == "mps":
        return process.is_mps_client
    if kind == "compute":
        return process.is_compute
    return process.is_graphics


def _writes_wide_v3(driver_version: str | None) -> bool:
    match = re.match(r"(\d+)\.(\d+)", driver_version or "")
    return match is not None and (535, 43) <= (int(match[1]), int(match[2])) <= (535, 86)


def _pynvml_level_only(name: str, *_args: Any) -> int:
    raise NotImplementedError(
        f"the simulated NVML answers {name} through its pynvml-level function only"
    )
