"""Ask the C NVML questions through the real nvidia-ml-py; print the answers as JSON.

Run in a subprocess (``python tests/cnvml/probe.py``) with ``LD_LIBRARY_PATH`` at a built
library: the binding loads ``libnvidia-ml.so.1`` once per process. Every answer is either
``{"value": ...}`` or ``{"error": "<the binding's exception class>"}``, so the tests check
exactly what a caller of the binding would see.
"""

from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Callable
from importlib import metadata
from typing import Any

import pynvml

SYMBOLS = (
    "nvmlInitWithFlags",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetMPSComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetMPSComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetMPSComputeRunningProcesses_v3",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetProcessUtilization",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetConfComputeMemSizeInfo",
    "nvmlDeviceGetRunningProcessDetailList",
)
PROCESS_CALLS = (
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
)
FILL = 0xAB


def answer(function: Callable[..., Any], *args: Any) -> dict[str, Any]:
    try:
        value = function(*args)
    except pynvml.NVMLError as error:
        return {"error": type(error).__name__}
    return {"value": plain(value)}


def plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, ctypes.Structure):
        return {name: plain(getattr(value, name)) for name, *_ in value._fields_}
    return value


def has_symbol(name: str) -> bool:
    try:
        pynvml._nvmlGetFunctionPointer(name)
    except pynvml.NVMLError_FunctionNotFound:
        return False
    return True


def entry_size(handle: Any, name: str) -> dict[str, Any]:
    """How many bytes per entry the library writes, called through the binding's lookup."""
    if not has_symbol(name):
        return {"error": "NVMLError_FunctionNotFound"}
    function = pynvml._nvmlGetFunctionPointer(name)
    count = ctypes.c_uint(0)
    result = function(handle, ctypes.byref(count), None)
    if result != pynvml.NVML_ERROR_INSUFFICIENT_SIZE or count.value == 0:
        return {"error": f"first call returned {result} with count {count.value}"}
    entries = count.value
    buffer = (ctypes.c_ubyte * (64 * entries))(*([FILL] * (64 * entries)))
    result = function(handle, ctypes.byref(count), buffer)
    if result != pynvml.NVML_SUCCESS:
        return {"error": f"second call returned {result}"}
    written = max(i for i, byte in enumerate(buffer) if byte != FILL) + 1
    return {"value": {"entries": entries, "bytes": written}}


class ProcessDetail(ctypes.Structure):
    """``nvmlProcessDetail_v1_t`` as nvml.h declares it (older bindings lack it)."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
        ("usedGpuCcProtectedMemory", ctypes.c_ulonglong),
    ]


class ProcessDetailList(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("mode", ctypes.c_uint),
        ("numProcArrayEntries", ctypes.c_uint),
        ("procArray", ctypes.POINTER(ProcessDetail)),
    ]


def detail_list(handle: Any) -> dict[str, Any]:
    """The compute processes from nvmlDeviceGetRunningProcessDetailList, where exported."""
    if not has_symbol("nvmlDeviceGetRunningProcessDetailList"):
        return {"error": "NVMLError_FunctionNotFound"}
    function = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetRunningProcessDetailList")
    plist = ProcessDetailList(ctypes.sizeof(ProcessDetailList) | 1 << 24, 0, 0, None)
    result = function(handle, ctypes.byref(plist))
    if result != pynvml.NVML_ERROR_INSUFFICIENT_SIZE:
        return {"error": f"first call returned {result}"}
    entries = (ProcessDetail * plist.numProcArrayEntries)()
    plist.procArray = entries
    result = function(handle, ctypes.byref(plist))
    if result != pynvml.NVML_SUCCESS:
        return {"error": f"second call returned {result}"}
    return {"value": [[e.pid, e.usedGpuMemory] for e in entries[: plist.numProcArrayEntries]]}


def main() -> None:
    pynvml.nvmlInit()
    report: dict[str, Any] = {
        "binding": metadata.version("nvidia-ml-py"),
        "binding_file": pynvml.__file__,
        "symbols": {name: has_symbol(name) for name in SYMBOLS},
        "driver_version": answer(pynvml.nvmlSystemGetDriverVersion),
        "cuda_v1": answer(pynvml.nvmlSystemGetCudaDriverVersion),
        "cuda_v2": answer(pynvml.nvmlSystemGetCudaDriverVersion_v2),
        "count": answer(pynvml.nvmlDeviceGetCount),
        "gpus": [],
    }
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle_answer = answer(pynvml.nvmlDeviceGetHandleByIndex, index)
        gpu: dict[str, Any] = {"handle": handle_answer.get("error", "ok")}
        if "error" not in handle_answer:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpu["name"] = answer(pynvml.nvmlDeviceGetName, handle)
            gpu["uuid"] = answer(pynvml.nvmlDeviceGetUUID, handle)
            gpu["serial"] = answer(pynvml.nvmlDeviceGetSerial, handle)
            gpu["memory_v1"] = answer(pynvml.nvmlDeviceGetMemoryInfo, handle)
            if hasattr(pynvml, "nvmlMemory_v2"):
                gpu["memory_v2"] = answer(
                    pynvml.nvmlDeviceGetMemoryInfo, handle, pynvml.nvmlMemory_v2
                )
            gpu["fan"] = answer(pynvml.nvmlDeviceGetFanSpeed, handle)
            gpu["temperature"] = answer(
                pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU
            )
            gpu["process_utilization"] = answer(
                lambda h: [(s.pid, s.smUtil) for s in pynvml.nvmlDeviceGetProcessUtilization(h, 0)],
                handle,
            )
            gpu["process_utilization_since_now"] = answer(
                pynvml.nvmlDeviceGetProcessUtilization, handle, 2**63
            )
            gpu["detail_list"] = detail_list(handle)
            gpu["entry_sizes"] = {name: entry_size(handle, name) for name in PROCESS_CALLS}
        report["gpus"].append(gpu)
    pynvml.nvmlShutdown()
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
