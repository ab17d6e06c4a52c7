"""Simulated GPM (GPU Performance Monitoring) and clock event reasons, as a driver answers.

GPM exists from driver R520 (before: FUNCTION_NOT_FOUND) on Hopper and newer only (compute
capability 9.0). ``nvmlGpmMetricsGet`` answers each metric from the scenario's ``activity``
signals at the newer sample's time, one without a signal NOT_SUPPORTED in its own
``nvmlReturn``. See docs/scenario.md ("Activity") and docs/activity.md.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pynvml

from gputop.core.fake.base import FakeDeviceHandle, nvml_error, nvml_function
from gputop.core.fake.card_load import CardLoad
from gputop.core.fake.scenario_types import ActivitySignals, ScenarioGpu
from gputop.core.fake.signals import Signal
from gputop.core.records import frozen

GPM_DRIVER = 520
"""The first driver branch with the GPM functions."""
CLOCKS_EVENT_DRIVER = 535
"""``nvmlDeviceGetCurrentClocksEventReasons`` replaced ``…ThrottleReasons`` (kept) in R535."""
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
MAX_METRICS = 477
"""nvml.h 13.x's NVML_GPM_METRIC_MAX: a request for more is an invalid argument."""
METRIC_SIGNALS = {
    1: "graphics",
    2: "sm_active",
    3: "sm_occupancy",
    5: "tensor_active",
    10: "dram_active",
    11: "fp64",
    12: "fp32",
    13: "fp16",
    20: "pcie_tx_mib_s",
    21: "pcie_rx_mib_s",
    60: "nvlink_rx_mib_s",
    61: "nvlink_tx_mib_s",
}
"""nvmlGpmMetricId_t to the scenario's ``activity`` key (percent, or MiB/s as GPM says)."""


@frozen
class _Taken:
    gpu: int
    gpu_instance_id: int | None
    t: float


class GpmCalls(CardLoad):
    """nvmlGpm* and the clock event reasons."""

    _gpm_buffers: dict[int, Any]
    _gpm_taken: dict[int, _Taken]

    def _gpm_ready(self) -> None:
        """FUNCTION_NOT_FOUND before R520; the sample book kept from the first call."""
        if self._driver_before(GPM_DRIVER):
            nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if not hasattr(self, "_gpm_buffers"):
            self._gpm_buffers, self._gpm_taken = {}, {}

    def _gpm_supported(self, gpu: ScenarioGpu) -> bool:
        capability = gpu.cuda_compute_capability
        if capability is None:
            return gpu.activity is not None
        return tuple(capability) >= (9, 0)

    @nvml_function()
    def nvmlGpmQueryDeviceSupport(self, handle: FakeDeviceHandle) -> Any:
        self._gpm_ready()
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(self._gpm_supported(self._gpu(handle)))
        return support

    @nvml_function("none")
    def nvmlGpmSampleAlloc(self) -> Any:
        self._gpm_ready()
        buffer = (ctypes.c_char * 16)()
        self._gpm_buffers[ctypes.addressof(buffer)] = buffer
        return ctypes.cast(buffer, pynvml.c_nvmlGpmSample_t)

    @nvml_function("none")
    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self._gpm_ready()
        address = self._gpm_address(sample)
        if self._gpm_buffers.pop(address, None) is None:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._gpm_taken.pop(address, None)

    @nvml_function("any")
    def nvmlGpmSampleGet(self, handle: FakeDeviceHandle, sample: Any) -> Any:
        """A whole GPU, or (a MIG device handle) its GPU instance."""
        self._gpm_ready()
        gpu = self._gpu(handle)
        if not self._gpm_supported(gpu):
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        mig = self._mig(handle)
        instance = None if mig is None else mig.gpu_instance_id
        self._gpm_taken[self._gpm_address(sample)] = _Taken(handle.gpu, instance, self.now())
        return sample

    @nvml_function()
    def nvmlGpmMigSampleGet(self, handle: FakeDeviceHandle, gpu_instance_id: int, sample: Any):
        self._gpm_ready()
        gpu = self._gpu(handle)
        if not self._gpm_supported(gpu):
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if gpu.mig_mode is None or gpu.mig_mode[0] != 1:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if not any(m.gpu_instance_id == gpu_instance_id for m in gpu.mig_devices):
            nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        taken = _Taken(handle.gpu, int(gpu_instance_id), self.now())
        self._gpm_taken[self._gpm_address(sample)] = taken
        return sample

    @nvml_function("none")
    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        self._gpm_ready()
        if request.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            nvml_error(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        count = int(request.numMetrics)
        if count > min(MAX_METRICS, len(request.metrics)):
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        first = self._gpm_taken.get(self._gpm_address(request.sample1))
        second = self._gpm_taken.get(self._gpm_address(request.sample2))
        device = None if first is None else (first.gpu, first.gpu_instance_id)
        if second is None or device != (second.gpu, second.gpu_instance_id):
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        signals = self._gpm_signals(second)
        metrics = request.metrics
        # pynvml's structures read and write each field through Python methods (bytes to
        # text and back; these fields are numbers): a ctypes entry is read and written plainly
        plain = isinstance(metrics, ctypes.Array)
        get = object.__getattribute__ if plain else getattr
        put = object.__setattr__ if plain else setattr
        for index in range(count):  # only numMetrics entries: the struct's length varies
            entry = metrics[index]
            metric_id = int(get(entry, "metricId"))
            key = METRIC_SIGNALS.get(metric_id)
            signal: Signal | None = None
            at = 0.0
            if key is not None and signals is not None:
                owner, at = signals
                signal = getattr(owner, key)
            if signal is None:
                put(entry, "nvmlReturn", pynvml.NVML_ERROR_NOT_SUPPORTED)
                put(entry, "value", 0.0)
                continue
            put(entry, "nvmlReturn", pynvml.NVML_SUCCESS)
            value = max(0.0, signal.value_at(at))
            put(entry, "value", min(100.0, value) if metric_id < 20 else value)
        return request

    def _gpm_signals(self, taken: _Taken) -> tuple[ActivitySignals, float] | None:
        """The signals of what was sampled, and the time to read them at."""
        gpu = self._scenario.gpus[taken.gpu]
        uuids = [gpu.uuid]
        own = gpu.activity
        if taken.gpu_instance_id is not None:
            devices = [m for m in gpu.mig_devices if m.gpu_instance_id == taken.gpu_instance_id]
            uuids = [m.uuid for m in devices]
            own = next((m.activity for m in devices if m.activity is not None), None)
        profile, scanner = self._scenario.job_profile, self._pinned_scanner
        if scanner is not None and profile is not None and profile.activity is not None:
            ages = [
                p.age_s * self.speed
                for p in scanner.processes()
                if any(u in p.uuids for u in uuids)
            ]
            if ages:
                return profile.activity, max(ages)
        return (own, taken.t) if own is not None else None

    @staticmethod
    def _gpm_address(sample: Any) -> int:
        address = ctypes.cast(sample, ctypes.c_void_p).value if sample else None
        if address is None:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return address

    # -- clock event (throttle) reasons ---------------------------------------------------

    @nvml_function()
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeDeviceHandle) -> int:
        if self._driver_before(CLOCKS_EVENT_DRIVER):
            nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return self._clock_event_mask(self._gpu(handle))

    @nvml_function()
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeDeviceHandle) -> int:
        return self._clock_event_mask(self._gpu(handle))

    def _clock_event_mask(self, gpu: ScenarioGpu) -> int:
        now = self.now()
        mask = 0
        for window in gpu.clock_event_reasons:
            if window.holds_at(now):
                mask |= window.mask
        return mask
