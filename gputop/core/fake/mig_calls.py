"""Simulated MIG calls: modes, MIG device handles, instance ids and attributes.

MIG turns one GPU into up to seven devices with their own handles, UUIDs, memory and SMs;
gputop walks them as nvitop does (max count, then a handle per slot, skipping empty slots),
so the fake answers that walk the way an A100 or H100 driver does.
"""

from __future__ import annotations

from typing import Any

import pynvml

from gputop.core.fake.base import (
    FakeDeviceHandle,
    FakeNvmlBase,
    nvml_error,
    nvml_function,
    nvml_twin,
)

MAX_MIG_DEVICES = 7


class MigCalls(FakeNvmlBase):
    """MIG mode, MIG device handles and the attributes that differ per MIG device."""

    @nvml_function()
    def nvmlDeviceGetMigMode(self, handle: FakeDeviceHandle) -> list[int]:
        """``[current, pending]``; NOT_SUPPORTED on a board without MIG."""
        current, pending = self._static(self._gpu(handle).mig_mode)
        return [current, pending]

    @nvml_function()
    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeDeviceHandle) -> int:
        """7 with MIG on; 0 on a MIG-capable GPU with MIG off, as NVML documents."""
        current, _pending = self._static(self._gpu(handle).mig_mode)
        return MAX_MIG_DEVICES if current else 0

    @nvml_function()
    def nvmlDeviceGetMigDeviceHandleByIndex(
        self, handle: FakeDeviceHandle, index: int
    ) -> FakeDeviceHandle:
        """The MIG device in slot ``index``; an empty slot is NOT_FOUND."""
        gpu = self._gpu(handle)
        self._static(gpu.mig_mode)
        if not isinstance(index, int) or not 0 <= index < MAX_MIG_DEVICES:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if index >= len(gpu.mig_devices):
            nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        return FakeDeviceHandle(handle.gpu, index)

    @nvml_function("any")
    def nvmlDeviceIsMigDeviceHandle(self, handle: FakeDeviceHandle) -> bool:
        return handle.mig is not None

    @nvml_function("any")
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
        self, handle: FakeDeviceHandle
    ) -> FakeDeviceHandle:
        _require_mig(handle)
        return FakeDeviceHandle(handle.gpu)

    @nvml_function("any")
    def nvmlDeviceGetGpuInstanceId(self, handle: FakeDeviceHandle) -> int:
        _require_mig(handle)
        return self._gpu(handle).mig_devices[handle.mig].gpu_instance_id  # type: ignore[index]

    @nvml_function("any")
    def nvmlDeviceGetComputeInstanceId(self, handle: FakeDeviceHandle) -> int:
        _require_mig(handle)
        return self._gpu(handle).mig_devices[handle.mig].compute_instance_id  # type: ignore[index]

    @nvml_function("any")
    def nvmlDeviceGetAttributes(self, handle: FakeDeviceHandle) -> Any:
        """SM count, slice counts and memory of a MIG device.

        Real drivers answer NOT_SUPPORTED for a whole GPU, MIG mode or not: the SM count of
        a full GPU comes from CUDA (``cuDeviceGetAttribute``), never from NVML.
        """
        mig = self._mig(handle)
        if mig is None:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        attributes = pynvml.c_nvmlDeviceAttributes()
        attributes.multiprocessorCount = int(self._static(mig.multiprocessor_count))
        slices = mig.gpu_slice_count or 0
        attributes.memorySizeMB = mig.memory_total_mib or 0
        attributes.gpuInstanceSliceCount = slices
        attributes.computeInstanceSliceCount = slices
        return attributes

    nvmlDeviceGetAttributes_v2 = nvml_twin(nvmlDeviceGetAttributes)


def _require_mig(handle: FakeDeviceHandle) -> None:
    if handle.mig is None:
        nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
