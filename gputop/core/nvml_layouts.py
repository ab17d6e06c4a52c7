"""The entries NVML's running-process calls write, one layout per driver generation
(docs/scenario.md, "Driver generations"), and R550's per-process utilisation request: read
by the sampler (sampling/nvml_running.py, nvml_processes.py) and written by the simulated
driver (fake/c_calls.py); the C imitation (tests/cnvml) writes them from nvml.h,
independently, so a mistake here is caught there."""

from __future__ import annotations

import ctypes

NVML_SUCCESS = 0
NVML_ERROR_INSUFFICIENT_SIZE = 7
NOT_ON_MIG = 0xFFFFFFFF
"""The instance ids NVML gives a process, or an event, that is not on a MIG instance."""


class ProcessInfoV1(ctypes.Structure):
    """``nvmlProcessInfo_v1_t``: 16 bytes."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class ProcessInfoV2(ProcessInfoV1):
    """``nvmlProcessInfo_v2_t``, also what ``_v3`` writes outside 535.43-535.86: 24 bytes
    (the MIG instance ids after v1's fields)."""

    _fields_ = [("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class ProcessInfoV3Wide(ProcessInfoV2):
    """The ``_v3`` entry of drivers 535.43-535.86: 32 bytes."""

    _fields_ = [("usedGpuCcProtectedMemory", ctypes.c_ulonglong)]


class ProcessUtilizationInfoV1(ctypes.Structure):
    """``nvmlProcessUtilizationInfo_v1_t``: one process's sample (40 bytes)."""

    _fields_ = [
        ("timeStamp", ctypes.c_ulonglong),
        ("pid", ctypes.c_uint),
        ("smUtil", ctypes.c_uint),
        ("memUtil", ctypes.c_uint),
        ("encUtil", ctypes.c_uint),
        ("decUtil", ctypes.c_uint),
        ("jpgUtil", ctypes.c_uint),
        ("ofaUtil", ctypes.c_uint),
    ]


class ProcessesUtilizationInfoV1(ctypes.Structure):
    """``nvmlProcessesUtilizationInfo_v1_t``: the request and the caller's array."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("processSamplesCount", ctypes.c_uint),
        ("lastSeenTimeStamp", ctypes.c_ulonglong),
        ("procUtilArray", ctypes.c_void_p),
    ]


UTILIZATION_INFO_V1 = ctypes.sizeof(ProcessesUtilizationInfoV1) | 1 << 24
"""``nvmlProcessesUtilizationInfo_v1``: NVML_STRUCT_VERSION(..., 1), 0x01000018."""
