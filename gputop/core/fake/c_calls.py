"""The simulated driver's C symbols: ``_nvmlGetFunctionPointer`` and the process lists.

gputop calls the running-process lists in C (``gputop.core.sampling.nvml_running``), because the
entry layout depends on the driver. The fake therefore offers the binding's symbol lookup
and answers those symbols in the C convention: ``fn(handle, unsigned *count, entries)``
returning an NVML return code, filling ``count`` and writing entries in the layout the
simulated driver generation writes (docs/scenario.md, "Driver generations"): 16 bytes for
the unversioned call, 24 for ``_v2`` and ``_v3``, 32 for ``_v3`` on drivers 535.43-535.86.
The layouts are written here again from ``nvml.h`` rather than imported from the backend, so
a mistake in one is caught by the other.
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

NVML_SUCCESS = 0
NVML_ERROR_INSUFFICIENT_SIZE = 7
NOT_ON_MIG = 0xFFFFFFFF


class _DriverEntryV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _DriverEntryV2(ctypes.Structure):
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class _DriverEntryR535(ctypes.Structure):
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
        ("usedGpuCcProtectedMemory", ctypes.c_ulonglong),
    ]


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
        if name in _OTHER_SYMBOLS or callable(getattr(type(self), name, None)):
            return functools.partial(_pynvml_level_only, name)
        nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    def _entry_layout(self, suffix: str) -> type[ctypes.Structure]:
        if suffix == "":
            return _DriverEntryV1
        if suffix == "_v3" and _writes_wide_v3(self._scenario.driver_version):
            return _DriverEntryR535
        return _DriverEntryV2

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
        listed = [p for p in self._processes(handle) if _in_list(p[0], kind)]
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
        for slot, (process, (gpu_instance_id, compute_instance_id)) in zip(
            written, listed, strict=True
        ):
            slot.pid = process.pid
            memory = process.used_memory_mib
            slot.usedGpuMemory = self._bytes(memory) if memory is not None else 2**64 - 1
            if layout is not _DriverEntryV1:
                slot.gpuInstanceId = gpu_instance_id
                slot.computeInstanceId = compute_instance_id
        return NVML_SUCCESS


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
