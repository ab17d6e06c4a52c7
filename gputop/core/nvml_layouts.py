"""The entries NVML's running-process calls write, one layout per driver generation
(docs/scenario.md, "Driver generations"): read by the sampler (sampling/nvml_running.py)
and written by the simulated driver (fake/c_calls.py); the C imitation (tests/cnvml) writes
them from nvml.h, independently."""

from __future__ import annotations

import ctypes

NVML_SUCCESS = 0
NVML_ERROR_INSUFFICIENT_SIZE = 7


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
