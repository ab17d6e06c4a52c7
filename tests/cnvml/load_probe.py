"""Read a card's load through the real nvidia-ml-py on the C NVML; print it as JSON.

Run in a subprocess (``python tests/cnvml/load_probe.py``) with ``LD_LIBRARY_PATH`` at a
built library and ``GPUTOP_CNVML_DATA`` at a data file. For each GPU: its utilisation, its
memory (v1, and v2 where the generation has it), every process the three lists name with
its memory, each process-utilisation sample (``nvmlDeviceGetProcessUtilization`` and, on
R550, ``nvmlDeviceGetProcessesUtilizationInfo``) and its MIG devices' memory, so a test can
add up what a card's processes hold and use and compare it with what the card says. A
reading the driver refuses is ``null``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pynvml

LISTS = (
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetMPSComputeRunningProcesses",
)


def _or_none(function: Callable[..., Any], *args: Any) -> Any:
    try:
        return function(*args)
    except pynvml.NVMLError:
        return None


def _text(value: str | bytes | None) -> str | None:
    """A string the binding answers (older releases answer bytes)."""
    return value.decode() if isinstance(value, bytes) else value


def _memory(handle: Any) -> dict[str, Any]:
    v1 = _or_none(pynvml.nvmlDeviceGetMemoryInfo, handle)
    v2 = None
    if hasattr(pynvml, "nvmlMemory_v2"):
        v2 = _or_none(pynvml.nvmlDeviceGetMemoryInfo, handle, pynvml.nvmlMemory_v2)
    return {
        "total": None if v1 is None else v1.total,
        "used_v1": None if v1 is None else v1.used,
        "used_v2": None if v2 is None else v2.used,
    }


def _processes(handle: Any) -> dict[str, int | None]:
    """Each pid any list names (a C+G process is in two), with the memory it holds."""
    held: dict[str, int | None] = {}
    for name in LISTS:
        for process in _or_none(getattr(pynvml, name), handle) or []:
            memory = process.usedGpuMemory
            held[str(process.pid)] = None if memory is None else int(memory)
    return held


def _samples(call: str, handle: Any) -> list[list[int]] | None:
    function = getattr(pynvml, call, None)
    if function is None:
        return None
    samples = _or_none(function, handle, 0)
    return None if samples is None else [[s.pid, s.smUtil, s.memUtil] for s in samples]


def _gpu(handle: Any) -> dict[str, Any]:
    rates = _or_none(pynvml.nvmlDeviceGetUtilizationRates, handle)
    migs = []
    for slot in range(_or_none(pynvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
        mig = _or_none(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, slot)
        if mig is not None:
            migs.append({"uuid": _text(pynvml.nvmlDeviceGetUUID(mig)), **_memory(mig)})
    return {
        "uuid": _text(_or_none(pynvml.nvmlDeviceGetUUID, handle)),
        "utilization": None if rates is None else [rates.gpu, rates.memory],
        "memory": _memory(handle),
        "processes": _processes(handle),
        "samples": _samples("nvmlDeviceGetProcessUtilization", handle),
        "samples_info": _samples("nvmlDeviceGetProcessesUtilizationInfo", handle),
        "migs": migs,
    }


def main() -> None:
    pynvml.nvmlInit()
    gpus = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = _or_none(pynvml.nvmlDeviceGetHandleByIndex, index)
        gpus.append(None if handle is None else _gpu(handle))
    pynvml.nvmlShutdown()
    json.dump({"gpus": gpus}, sys.stdout)


if __name__ == "__main__":
    main()
