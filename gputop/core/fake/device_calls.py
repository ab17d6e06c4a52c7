"""Simulated per-GPU NVML calls: identity, memory, sensors, clocks, modes and links.

Each returns what pynvml returns, in NVML's units (bytes, milliwatts, MHz, KB/s), using
pynvml's own ctypes structures where pynvml returns one, so code written against the real
module reads the fake without knowing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import pynvml

from gputop.core.fake.base import MIB, FakeDeviceHandle, nvml_error, nvml_function, nvml_twin
from gputop.core.fake.card_load import CardLoad
from gputop.core.fake.signals import Signal

PCI_VENDOR_NVIDIA = 0x10DE
CODEC_SAMPLING_PERIOD_US = 167_000
"""What real boards report as the encoder/decoder sampling period."""


class FakePciInfo(ctypes.Structure):
    """``nvmlPciInfo_t``'s layout as a plain ctypes struct, so ``busId`` reads as bytes.

    pynvml's own struct decodes strings on attribute access; older bindings did not, and
    gputop must cope with both, so the fake gives the harder form.
    """

    _fields_ = pynvml.nvmlPciInfo_t._fields_


class DeviceCalls(CardLoad):
    """Identity, memory, sensors, clocks, modes, PCIe and NVLink of one GPU."""

    # -- identity ---------------------------------------------------------------------------

    @nvml_function()
    def nvmlDeviceGetIndex(self, handle: FakeDeviceHandle) -> int:
        return handle.gpu

    @nvml_function("any")
    def nvmlDeviceGetName(self, handle: FakeDeviceHandle) -> str:
        name = self._gpu(handle).name
        mig = self._mig(handle)
        if mig is None:
            return name
        return f"{name} MIG {mig.profile}" if mig.profile else f"{name} MIG"

    @nvml_function("any")
    def nvmlDeviceGetUUID(self, handle: FakeDeviceHandle) -> str:
        mig = self._mig(handle)
        return mig.uuid if mig is not None else self._gpu(handle).uuid

    @nvml_function()
    def nvmlDeviceGetSerial(self, handle: FakeDeviceHandle) -> str:
        return str(self._static(self._gpu(handle).serial))

    @nvml_function("any")
    def nvmlDeviceGetPciInfo(self, handle: FakeDeviceHandle) -> FakePciInfo:
        bus_id = str(self._static(self._gpu(handle).pci_bus_id))
        domain, bus, rest = bus_id.split(":")
        device = rest.split(".")[0]
        info = FakePciInfo()
        info.busId = bus_id.encode()
        info.busIdLegacy = f"{int(domain, 16):04X}:{bus}:{rest}".encode()
        info.domain = int(domain, 16)
        info.bus = int(bus, 16)
        info.device = int(device, 16)
        info.pciDeviceId = PCI_VENDOR_NVIDIA
        info.pciSubSystemId = PCI_VENDOR_NVIDIA
        return info

    nvmlDeviceGetPciInfo_v3 = nvml_twin(nvmlDeviceGetPciInfo)

    @nvml_function()
    def nvmlDeviceGetCudaComputeCapability(self, handle: FakeDeviceHandle) -> tuple[int, int]:
        major, minor = self._static(self._gpu(handle).cuda_compute_capability)
        return (major, minor)

    # -- memory -----------------------------------------------------------------------------

    @nvml_function("any")
    def nvmlDeviceGetMemoryInfo(self, handle: FakeDeviceHandle, version: int | None = None) -> Any:
        """v1 (no ``version``): "used" includes the memory the driver reserves, as real v1
        calls report it. v2 (``version``, symbol ``nvmlDeviceGetMemoryInfo_v2``, R510+):
        ``reserved`` apart and "used" without it. The scenario's ``memory_used_mib`` is the
        v2 "used"; ``memory_reserved_mib`` the reserved part (0 when absent)."""
        owner = self._mig(handle) or self._gpu(handle)
        total = int(self._static(owner.memory_total_mib)) * MIB
        reserved = min(total, (getattr(owner, "memory_reserved_mib", None) or 0) * MIB)
        used = min(total - reserved, self._card_used_bytes(owner, self.reading_time()))
        free = total - reserved - used
        if version:
            if "nvmlDeviceGetMemoryInfo_v2" in self._scenario.missing_functions:
                nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            memory: Any = pynvml.c_nvmlMemory_v2_t()
            memory.version = version
            memory.total, memory.reserved, memory.used, memory.free = total, reserved, used, free
            return memory
        memory = pynvml.c_nvmlMemory_t()
        memory.total, memory.used, memory.free = total, used + reserved, free
        return memory

    @nvml_function()
    def nvmlDeviceGetBAR1MemoryInfo(self, handle: FakeDeviceHandle) -> Any:
        gpu = self._gpu(handle)
        total = int(self._static(gpu.bar1_total_mib)) * MIB
        used = min(total, self._bytes_or_zero(gpu.bar1_used_mib))
        bar1 = pynvml.c_nvmlBAR1Memory_t()
        bar1.bar1Total, bar1.bar1Used, bar1.bar1Free = total, used, total - used
        return bar1

    # -- sensors ----------------------------------------------------------------------------

    @nvml_function()
    def nvmlDeviceGetUtilizationRates(self, handle: FakeDeviceHandle) -> Any:
        """Needs ``utilization_gpu``; an absent ``utilization_memory`` reads 0. A job
        launched on the card adds its own (card_load.py). Over the same one-second sample as
        its processes' SM %, so they fit in it."""
        rates = pynvml.c_nvmlUtilization_t()
        rates.gpu, rates.memory = self._card_utilization(self._gpu(handle), self.sample_time())
        return rates

    @nvml_function()
    def nvmlDeviceGetTemperature(self, handle: FakeDeviceHandle, sensor: int) -> int:
        """Deprecated in nvidia-ml-py 13 for ``nvmlDeviceGetTemperatureV``; same reading."""
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._uint(self._gpu(handle).temperature_c)

    @nvml_function()
    def nvmlDeviceGetTemperatureV(
        self, handle: FakeDeviceHandle, sensor: int, version: int | None = None
    ) -> int:
        """The versioned temperature call; list it in ``missing_functions`` for drivers
        without it. Returns the temperature as the binding's wrapper does."""
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._uint(self._gpu(handle).temperature_c)

    @nvml_function()
    def nvmlDeviceGetFanSpeed(self, handle: FakeDeviceHandle) -> int:
        """Percent of the fan's rated speed: real boards report more than 100."""
        return self._uint(self._gpu(handle).fan_percent)

    @nvml_function()
    def nvmlDeviceGetPowerUsage(self, handle: FakeDeviceHandle) -> int:
        return max(0, round(self._value(self._gpu(handle).power_w) * 1000))

    @nvml_function()
    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeDeviceHandle) -> int:
        return round(self._static(self._gpu(handle).power_limit_w) * 1000)

    nvmlDeviceGetPowerManagementLimit = nvml_twin(nvmlDeviceGetEnforcedPowerLimit)

    @nvml_function()
    def nvmlDeviceGetEncoderUtilization(self, handle: FakeDeviceHandle) -> list[int]:
        return [self._percent(self._gpu(handle).encoder_util), CODEC_SAMPLING_PERIOD_US]

    @nvml_function()
    def nvmlDeviceGetDecoderUtilization(self, handle: FakeDeviceHandle) -> list[int]:
        return [self._percent(self._gpu(handle).decoder_util), CODEC_SAMPLING_PERIOD_US]

    # -- clocks -----------------------------------------------------------------------------

    @nvml_function()
    def nvmlDeviceGetClockInfo(self, handle: FakeDeviceHandle, clock_type: int) -> int:
        clocks = self._gpu(handle).clocks_mhz
        signals: Sequence[Signal | None] = (clocks.graphics, clocks.sm, clocks.mem, clocks.video)
        return self._uint(signals[_clock_slot(clock_type)])

    @nvml_function()
    def nvmlDeviceGetMaxClockInfo(self, handle: FakeDeviceHandle, clock_type: int) -> int:
        clocks = self._gpu(handle).max_clocks_mhz
        values = (clocks.graphics, clocks.sm, clocks.mem, clocks.video)
        return int(self._static(values[_clock_slot(clock_type)]))

    # -- modes ------------------------------------------------------------------------------

    @nvml_function()
    def nvmlDeviceGetPerformanceState(self, handle: FakeDeviceHandle) -> int:
        return int(self._static(self._gpu(handle).performance_state))

    @nvml_function()
    def nvmlDeviceGetPersistenceMode(self, handle: FakeDeviceHandle) -> int:
        return int(self._static(self._gpu(handle).persistence_mode))

    @nvml_function()
    def nvmlDeviceGetDisplayActive(self, handle: FakeDeviceHandle) -> int:
        return int(self._static(self._gpu(handle).display_active))

    @nvml_function()
    def nvmlDeviceGetComputeMode(self, handle: FakeDeviceHandle) -> int:
        return int(self._static(self._gpu(handle).compute_mode))

    # -- PCIe, NVLink (ECC and link errors: health_calls.py) ------------------------------

    @nvml_function()
    def nvmlDeviceGetPcieThroughput(self, handle: FakeDeviceHandle, counter: int) -> int:
        gpu = self._gpu(handle)
        if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES:
            return self._uint(gpu.pcie_tx_kbps)
        if counter == pynvml.NVML_PCIE_UTIL_RX_BYTES:
            return self._uint(gpu.pcie_rx_kbps)
        nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    @nvml_function()
    def nvmlDeviceGetNvLinkState(self, handle: FakeDeviceHandle, link: int) -> int:
        count = int(self._static(self._gpu(handle).nvlink_count))
        if not 0 <= link < count:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED

    @nvml_function()
    def nvmlDeviceGetFieldValues(self, handle: FakeDeviceHandle, field_ids: Sequence[Any]) -> Any:
        """NVLink link count, TX/RX throughput (KiB/s, all links together); other fields
        NOT_SUPPORTED, each in its own ``nvmlReturn`` as the driver reports them."""
        gpu = self._gpu(handle)
        link_count = Signal.constant(gpu.nvlink_count) if gpu.nvlink_count is not None else None
        signals = {
            pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT: link_count,
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: gpu.nvlink_tx_kbps,
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: gpu.nvlink_rx_kbps,
        }
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        timestamp_us = round(self._epoch_at(self.now()) * 1_000_000)
        for value, field_id in zip(values, field_ids, strict=True):
            if isinstance(field_id, tuple):
                value.fieldId, value.scopeId = field_id
            else:
                value.fieldId = field_id
            signal = signals.get(value.fieldId)
            value.timestamp = timestamp_us
            if signal is None:
                value.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                continue
            value.nvmlReturn = pynvml.NVML_SUCCESS
            if value.fieldId == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT:
                value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                value.value.uiVal = self._uint(signal)
            else:
                value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                value.value.ullVal = self._uint(signal)
        return values


def _clock_slot(clock_type: int) -> int:
    if clock_type not in (
        pynvml.NVML_CLOCK_GRAPHICS,
        pynvml.NVML_CLOCK_SM,
        pynvml.NVML_CLOCK_MEM,
        pynvml.NVML_CLOCK_VIDEO,
    ):
        nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    return int(clock_type)
