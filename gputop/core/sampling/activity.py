"""True activity through NVML's GPM (GPU Performance Monitoring), Hopper and newer.

For each GPU GPM supports, and each GPU instance of a MIG GPU, a ``GpmTarget`` holds two
samples and one ``nvmlGpmMetricsGet_t``, allocated once; each tick fills the older sample
and asks for the metrics between the two, so sampling never sleeps (a tick within NVML's
100 ms reuses the last figures: ``Activity.reused``). Only ``numMetrics`` entries are
written and read, with a guard entry after them (``NVML_GPM_METRIC_MAX`` differs between
bindings); one failing metric is ``None``, and without GPM there are no figures at all,
never a substitute from utilisation rates. See docs/activity.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gputop.core.model import NO_ACTIVITY, Activity
from gputop.core.sampling.nvml_fields import FieldReader, GpuLostError

MIB = 1024 * 1024
MIN_INTERVAL_S = 0.1
"""nvml.h: two GPM samples of one device must be more than 100 ms apart."""
MAX_RATE_BYTES_PER_S = 1e13
"""No PCIe or NVLink total reaches 10 TB/s; a larger figure is a driver fault, not a rate."""

METRICS: tuple[tuple[str, int, float], ...] = (
    ("graphics_percent", 1, 1.0),  # NVML_GPM_METRIC_GRAPHICS_UTIL
    ("sm_active_percent", 2, 1.0),  # NVML_GPM_METRIC_SM_UTIL
    ("sm_occupancy_percent", 3, 1.0),  # NVML_GPM_METRIC_SM_OCCUPANCY
    ("tensor_active_percent", 5, 1.0),  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
    ("dram_active_percent", 10, 1.0),  # NVML_GPM_METRIC_DRAM_BW_UTIL
    ("fp64_percent", 11, 1.0),  # NVML_GPM_METRIC_FP64_UTIL
    ("fp32_percent", 12, 1.0),  # NVML_GPM_METRIC_FP32_UTIL
    ("fp16_percent", 13, 1.0),  # NVML_GPM_METRIC_FP16_UTIL
    ("pcie_tx_bytes_per_s", 20, MIB),  # NVML_GPM_METRIC_PCIE_TX_PER_SEC, MiB/s
    ("pcie_rx_bytes_per_s", 21, MIB),  # NVML_GPM_METRIC_PCIE_RX_PER_SEC
    ("nvlink_rx_bytes_per_s", 60, MIB),  # NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC
    ("nvlink_tx_bytes_per_s", 61, MIB),  # NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC
)
"""(Activity field, nvmlGpmMetricId_t, factor to gputop's unit)."""
GUARD_BYTE = 0xA5


class GpmTarget:
    """One GPU or one MIG GPU instance: two samples and one metrics struct, reused."""

    def __init__(self, nvml: Any, take: Callable[[Any], Any]) -> None:
        self._nvml = nvml
        self._take = take
        self._samples: list[Any] = []
        self._newest = -1
        """Index in ``_samples`` of the newest good sample; -1: none yet."""
        self.taken_at = -math.inf
        self._last = Activity(gpm=True)
        self._request: Any = None
        self._count = 0
        self._guard = b""
        self.failed: str | None = None
        """Why this target is no longer asked (a driver fault), for docs and tests."""

    def read(self, now_s: float) -> Activity:
        """The figures since the previous tick (``now_s``: a monotonic clock)."""
        if self.failed is not None:
            return NO_ACTIVITY
        if self._newest >= 0 and now_s - self.taken_at <= MIN_INTERVAL_S:
            return replace(self._last, reused=True)
        try:
            if not self._samples:
                self._allocate()
            fill = 1 - self._newest if self._newest >= 0 else 0
            self._take(self._samples[fill])
        except self._nvml.NVMLError_GpuIsLost as error:
            raise GpuLostError("nvmlGpmSampleGet") from error
        except self._nvml.NVMLError_NotSupported:
            self.failed = "not supported"
            return NO_ACTIVITY
        except Exception:  # a refused or failed sample: figures unknown this tick
            self._newest = -1
            self._last = Activity(gpm=True)
            return self._last
        previous, self._newest, self.taken_at = self._newest, fill, now_s
        if previous < 0:
            self._last = Activity(gpm=True)
        else:
            self._last = self._metrics(self._samples[previous], self._samples[fill])
        return self._last

    def close(self) -> None:
        for sample in self._samples:
            with contextlib.suppress(Exception):  # shutting down: nothing more to do for it
                self._nvml.nvmlGpmSampleFree(sample)
        self._samples = []
        self._newest = -1

    def _allocate(self) -> None:
        nvml = self._nvml
        samples = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
        request = nvml.c_nvmlGpmMetricsGet_t()
        capacity = len(request.metrics)
        count = min(len(METRICS), capacity - 1)
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = count
        for entry, (_, metric_id, _) in zip(request.metrics, METRICS[:count], strict=False):
            entry.metricId = metric_id
        guard = _entry_address(request, count)
        size = ctypes.sizeof(request.metrics[0])
        ctypes.memset(guard, GUARD_BYTE, size)
        self._samples, self._request, self._count = samples, request, count
        self._guard = bytes([GUARD_BYTE]) * size

    def _metrics(self, older: Any, newer: Any) -> Activity:
        request = self._request
        request.sample1, request.sample2 = older, newer
        try:
            self._nvml.nvmlGpmMetricsGet(request)
        except self._nvml.NVMLError_GpuIsLost as error:
            raise GpuLostError("nvmlGpmMetricsGet") from error
        except Exception:
            return Activity(gpm=True)
        guard = ctypes.string_at(_entry_address(request, self._count), len(self._guard))
        if guard != self._guard:
            self.failed = "the driver wrote past numMetrics"
            return NO_ACTIVITY
        success = self._nvml.NVML_SUCCESS
        figures: dict[str, Any] = {}
        for entry, (key, metric_id, factor) in zip(
            request.metrics, METRICS[: self._count], strict=False
        ):
            # pynvml's structures read each field through a Python __getattribute__ (it
            # decodes bytes; these fields are numbers): read them plainly
            get = _plain_get if isinstance(entry, ctypes.Structure) else getattr
            if get(entry, "metricId") != metric_id or get(entry, "nvmlReturn") != success:
                continue
            value = _figure(get(entry, "value"), factor)
            if value is not None:
                figures[key] = value
        return Activity(gpm=True, **figures)


_plain_get = object.__getattribute__
"""A field of a ctypes structure, without a subclass's ``__getattribute__``."""


def _entry_address(request: Any, index: int) -> int:
    return (
        ctypes.addressof(request)
        + type(request).metrics.offset
        + index * ctypes.sizeof(request.metrics._type_)
    )


def _figure(value: Any, factor: float) -> float | None:
    """A metric's value in gputop's unit, or ``None`` for NaN, a negative or absurd value."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number) or number < 0:
        return None
    if factor == 1.0:
        return min(number, 100.0)
    number *= factor
    return number if number <= MAX_RATE_BYTES_PER_S else None


class ActivitySampler:
    """Every GPU's and MIG instance's ``GpmTarget``, made on first use and kept."""

    def __init__(
        self, nvml: Any, reader: FieldReader, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._nvml = nvml
        self._reader = reader
        self._clock = clock
        self._gpus: dict[int, GpmTarget] = {}
        self._instances: dict[tuple[int, int], GpmTarget] = {}

    def open_gpu(self, index: int, handle: Any) -> bool:
        """Whether GPM supports this GPU (asked once, when the card is opened)."""
        support = self._reader.read("nvmlGpmQueryDeviceSupport", handle)
        supported = bool(getattr(support, "isSupportedDevice", 0)) if support else False
        if supported and self._reader.has("nvmlGpmSampleGet"):
            nvml = self._nvml
            self._gpus[index] = GpmTarget(nvml, lambda s: nvml.nvmlGpmSampleGet(handle, s))
            return True
        return False

    def supported(self, index: int) -> bool:
        target = self._gpus.get(index)
        return target is not None and target.failed is None

    def gpu(self, index: int) -> Activity:
        target = self._gpus.get(index)
        return NO_ACTIVITY if target is None else target.read(self._clock())

    def instance(self, index: int, handle: Any, gpu_instance_id: int) -> Activity:
        """A MIG GPU instance of the GPU ``index`` (``handle``: the parent GPU's)."""
        if index not in self._gpus:
            return NO_ACTIVITY
        key = (index, gpu_instance_id)
        target = self._instances.get(key)
        if target is None:
            nvml = self._nvml
            target = GpmTarget(nvml, lambda s: nvml.nvmlGpmMigSampleGet(handle, gpu_instance_id, s))
            self._instances[key] = target
        return target.read(self._clock())

    def any(self) -> bool:
        return bool(self._gpus)

    def ready_in(self) -> float:
        """Seconds until every target may take its next sample (0: now)."""
        targets = (*self._gpus.values(), *self._instances.values())
        newest = max((t.taken_at for t in targets), default=-math.inf)
        return max(0.0, MIN_INTERVAL_S - (self._clock() - newest))

    def close(self) -> None:
        for target in (*self._gpus.values(), *self._instances.values()):
            target.close()
