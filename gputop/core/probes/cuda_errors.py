"""CUDA driver API error codes in words, for the driver probe's messages.

A bare number ("CUDA error 803") tells a person nothing; these are the codes a probe meets
on real machines and containers (values from the driver API's ``CUresult``; see
docs/cuda-visibility.md, "The driver probe").
"""

from __future__ import annotations

CUDA_ERROR_NOT_INITIALIZED = 3
CUDA_ERROR_STUB_LIBRARY = 34
CUDA_ERROR_INSUFFICIENT_DRIVER = 35
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_INVALID_DEVICE = 101
CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803
CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804

_KNOWN: dict[int, tuple[str, str]] = {
    CUDA_ERROR_NOT_INITIALIZED: (
        "CUDA_ERROR_NOT_INITIALIZED",
        "the driver was not initialised (cuInit failed or was not called)",
    ),
    CUDA_ERROR_STUB_LIBRARY: (
        "CUDA_ERROR_STUB_LIBRARY",
        "this libcuda is the CUDA toolkit's stub, not a driver: the NVIDIA driver is not "
        "installed here, or the stub comes first on the library path",
    ),
    CUDA_ERROR_INSUFFICIENT_DRIVER: (
        "CUDA_ERROR_INSUFFICIENT_DRIVER",
        "the installed NVIDIA driver is older than this CUDA library needs",
    ),
    CUDA_ERROR_NO_DEVICE: (
        "CUDA_ERROR_NO_DEVICE",
        "no CUDA-capable device is visible",
    ),
    CUDA_ERROR_INVALID_DEVICE: (
        "CUDA_ERROR_INVALID_DEVICE",
        "a device ordinal is not valid",
    ),
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: (
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        "the CUDA driver library and the loaded kernel module are different versions "
        "(a driver update without a reboot, or a container's libcuda that does not match "
        "the host's driver)",
    ),
    CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: (
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        "the CUDA forward-compatibility package in use does not support this GPU "
        "(forward compatibility is for data-centre GPUs)",
    ),
}


def describe_cuda_error(code: int, call: str) -> str:
    """One sentence for a person: which call failed, the error's name and number, and why."""
    known = _KNOWN.get(code)
    if known is None:
        return f"{call} returned CUDA error {code}"
    name, meaning = known
    return f"{call} returned {name} ({code}): {meaning}"
