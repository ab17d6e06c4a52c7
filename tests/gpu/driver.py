"""Is there an NVIDIA driver here? Asked once, cheaply, at collection (no gputop import).

The answer is what the whole real-GPU suite hangs on: without a driver every check is
skipped, once, with this reason (tests/gpu/conftest.py); docs/real-gpu.md.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from dataclasses import dataclass

LIBNVML = "libnvidia-ml.so.1"
NVML_SUCCESS = 0


@dataclass(frozen=True)
class Driver:
    present: bool
    reason: str
    """Why not, where ``present`` is false; one line."""


def detect(library: str = LIBNVML) -> Driver:
    """Present when NVML loads and initialises and ``nvidia-smi`` is on PATH."""
    if os.environ.get("GPUTOP_GPU_CHECK_NO_DRIVER"):  # a test's way to see the no-driver path
        return Driver(False, "no NVIDIA driver: GPUTOP_GPU_CHECK_NO_DRIVER is set")
    try:
        nvml = ctypes.CDLL(library)
    except OSError as error:
        return Driver(False, f"no NVIDIA driver: {library} cannot be loaded ({error})")
    try:
        code = nvml.nvmlInit_v2()
    except AttributeError:
        return Driver(False, f"no NVIDIA driver: {library} has no nvmlInit_v2")
    if code != NVML_SUCCESS:
        return Driver(False, f"no NVIDIA driver: nvmlInit_v2 returned {code}")
    count = ctypes.c_uint(0)
    counted = nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
    nvml.nvmlShutdown()
    if counted != NVML_SUCCESS or count.value == 0:
        return Driver(False, "no NVIDIA GPU: the driver loads but lists no GPU")
    if shutil.which("nvidia-smi") is None:
        return Driver(False, "no nvidia-smi on PATH: the reference every check compares with")
    return Driver(True, "")


DRIVER = detect()
