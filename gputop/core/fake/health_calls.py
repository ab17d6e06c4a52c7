"""Simulated health calls: ECC counts, retired pages, remapped rows, PCIe replays, NVLink
errors and the Xid event set (docs/health.md, docs/scenario.md).

What a card answers depends on its kind, as on a driver: a board without ECC (no
``ecc_uncorrected_volatile``: GeForce) answers NOT_SUPPORTED to the ECC and memory-repair
calls; an ECC board before Ampere (compute capability below 8.0: V100, P100, T4) retires pages
and has no row remapper; Ampere and newer (A100, H100) remap rows and retire no pages, and
their remapper is NOT_SUPPORTED while MIG instances exist. ``health_answers`` decides it, for
the fake and for the C NVML's data file (tests/cnvml/data.py) alike.
"""

from __future__ import annotations

import threading
import time
from dataclasses import field
from typing import Any

import pynvml

from gputop.core.fake.base import FakeDeviceHandle, FakeNvmlBase, nvml_error, nvml_function
from gputop.core.fake.scenario_types import ScenarioGpu
from gputop.core.nvml_layouts import NOT_ON_MIG
from gputop.core.records import frozen, mutable

AMPERE = (8, 0)
XID_CRITICAL_ERROR = 0x8
"""nvmlEventTypeXidCriticalError."""
SINGLE_BIT_ECC = 0x1
DOUBLE_BIT_ECC = 0x2
"""nvmlEventTypeSingleBitEccError, nvmlEventTypeDoubleBitEccError: only ECC boards have them."""
ECC_EVENTS = SINGLE_BIT_ECC | DOUBLE_BIT_ECC
MAX_WAIT_S = 5.0


@frozen
class HealthAnswers:
    ecc: tuple[int, int, int, int] | None
    """(corrected volatile, uncorrected volatile, corrected aggregate, uncorrected aggregate)."""
    retired_pages: tuple[int, int, bool] | None
    remapped_rows: tuple[int, int, bool, bool] | None
    pcie_replays: int
    nvlink_crc_per_link: tuple[int, ...]


def health_answers(gpu: ScenarioGpu) -> HealthAnswers:
    """What ``gpu`` answers to each health call, by its kind and its scenario fields."""
    health = gpu.health
    ecc = None
    if gpu.ecc_uncorrected_volatile is not None:
        corrected = health.ecc_corrected_volatile or 0
        uncorrected = gpu.ecc_uncorrected_volatile
        ecc = (
            corrected,
            uncorrected,
            max(corrected, health.ecc_corrected_aggregate or 0),
            max(uncorrected, health.ecc_uncorrected_aggregate or 0),
        )
    capability = gpu.cuda_compute_capability
    pages = rows = None
    if ecc is not None and capability is not None:
        if capability < AMPERE:
            pages = health.retired_pages or (0, 0, False)
        elif not (gpu.mig_mode is not None and gpu.mig_mode[0] == 1 and gpu.mig_devices):
            rows = health.remapped_rows or (0, 0, False, False)
    elif ecc is not None:
        pages, rows = health.retired_pages, health.remapped_rows
    links = gpu.nvlink_count or 0
    total = health.nvlink_crc_errors or 0
    per_link = tuple(total // links + (1 if i < total % links else 0) for i in range(links))
    return HealthAnswers(ecc, pages, rows, health.pcie_replays or 0, per_link)


@frozen
class FakeEventData:
    """``nvmlEventData_t`` as pynvml gives it, with the fake's device handle."""

    device: FakeDeviceHandle
    eventType: int
    eventData: int
    gpuInstanceId: int = NOT_ON_MIG
    computeInstanceId: int = NOT_ON_MIG


@mutable(slots=True)
class FakeEventSet:
    """An event set: the GPUs registered, and how far each source has been delivered."""

    gpus: dict[int, int] = field(default_factory=dict)
    """GPU index -> the event types registered for it."""
    scenario_delivered: dict[int, int] = field(default_factory=dict)
    """GPU index -> Xids of the scenario's ``xid_events`` delivered (a count of 5000 is 5000)."""
    injected_delivered: int = 0
    freed: bool = False


class HealthCalls(FakeNvmlBase):
    """The health calls and the event set of the simulated GPUs."""

    def _answers(self, handle: FakeDeviceHandle) -> HealthAnswers:
        return health_answers(self._gpu(handle))

    @nvml_function()
    def nvmlDeviceGetTotalEccErrors(
        self, handle: FakeDeviceHandle, error_type: int, counter_type: int
    ) -> int:
        if error_type not in (0, 1) or counter_type not in (0, 1):
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        ecc = self._static(self._answers(handle).ecc)
        injected = self._ecc_injected.get(handle.gpu, (0, 0))[error_type]
        return int(ecc[error_type + 2 * counter_type]) + injected

    @nvml_function()
    def nvmlDeviceGetRetiredPages(self, handle: FakeDeviceHandle, cause: int) -> list[int]:
        single, double, _ = self._static(self._answers(handle).retired_pages)
        count = _by_cause(cause, single, double)
        base = 0x1_0000_0000 * (cause + 1)
        return [base + 0x1000 * i for i in range(count)]

    @nvml_function()
    def nvmlDeviceGetRetiredPages_v2(
        self, handle: FakeDeviceHandle, cause: int
    ) -> list[dict[str, int]]:
        """As pynvml's wrapper returns it: each page's address and the time it was retired."""
        pages = self.nvmlDeviceGetRetiredPages(handle, cause)
        stamp = round(self._epoch_at(0.0) * 1_000_000)
        return [{"address": address, "timestamp": stamp} for address in pages]

    @nvml_function()
    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: FakeDeviceHandle) -> int:
        _, _, pending = self._static(self._answers(handle).retired_pages)
        return pynvml.NVML_FEATURE_ENABLED if pending else pynvml.NVML_FEATURE_DISABLED

    @nvml_function()
    def nvmlDeviceGetRemappedRows(self, handle: FakeDeviceHandle) -> tuple[int, int, int, int]:
        correctable, uncorrectable, pending, failed = self._static(
            self._answers(handle).remapped_rows
        )
        return (correctable, uncorrectable, int(pending), int(failed))

    @nvml_function()
    def nvmlDeviceGetPcieReplayCounter(self, handle: FakeDeviceHandle) -> int:
        return self._answers(handle).pcie_replays

    @nvml_function()
    def nvmlDeviceGetNvLinkErrorCounter(
        self, handle: FakeDeviceHandle, link: int, counter: int
    ) -> int:
        per_link = self._answers(handle).nvlink_crc_per_link
        if not per_link:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(per_link) or not 0 <= counter <= 4:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return per_link[link] if counter == pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT else 0

    # -- Xid events -------------------------------------------------------------------------

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._xid_arrived = threading.Condition()
        self._injected: list[tuple[int, int, int]] = []
        """(GPU, event type, event data), in the order they came."""
        self._ecc_injected: dict[int, tuple[int, int]] = {}
        """GPU -> (corrected, uncorrected) errors injected, on top of the scenario's."""

    def inject_xid(self, gpu: int, xid: int, count: int = 1) -> None:
        """Make GPU ``gpu`` report Xid ``xid`` ``count`` times now, to every event set it is
        registered with (for tests, while gputop runs)."""
        with self._xid_arrived:
            self._injected.extend([(gpu, XID_CRITICAL_ERROR, xid)] * count)
            self._xid_arrived.notify_all()

    def inject_ecc_error(self, gpu: int, *, uncorrectable: bool) -> None:
        """An ECC error on ECC board ``gpu`` now: its counts (volatile and aggregate) rise by
        one and the event sets registered for its type hear of it (for tests)."""
        self._static(self._answers(FakeDeviceHandle(gpu)).ecc)
        with self._xid_arrived:
            corrected, uncorrected = self._ecc_injected.get(gpu, (0, 0))
            added = (corrected, uncorrected + 1) if uncorrectable else (corrected + 1, uncorrected)
            self._ecc_injected[gpu] = added
            kind = DOUBLE_BIT_ECC if uncorrectable else SINGLE_BIT_ECC
            self._injected.append((gpu, kind, 0))
            self._xid_arrived.notify_all()

    @nvml_function("none")
    def nvmlEventSetCreate(self) -> FakeEventSet:
        return FakeEventSet()

    @nvml_function()
    def nvmlDeviceRegisterEvents(
        self, handle: FakeDeviceHandle, event_types: int, event_set: FakeEventSet
    ) -> None:
        if not isinstance(event_set, FakeEventSet) or event_set.freed:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if not event_types or event_types & ~self._event_types(handle):
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)  # as NVML: one type it lacks, none
        event_set.gpus[handle.gpu] = event_set.gpus.get(handle.gpu, 0) | event_types

    @nvml_function()
    def nvmlDeviceGetSupportedEventTypes(self, handle: FakeDeviceHandle) -> int:
        return self._event_types(handle)

    def _event_types(self, handle: FakeDeviceHandle) -> int:
        """The Xid on every card; the ECC errors on boards with ECC."""
        return XID_CRITICAL_ERROR | (ECC_EVENTS if self._answers(handle).ecc is not None else 0)

    @nvml_function("none")
    def nvmlEventSetWait_v2(self, event_set: FakeEventSet, timeout_ms: int) -> FakeEventData:
        """The next Xid of a registered GPU: the scenario's whose time has come (also those
        from before the set was made, so a one-shot reading shows them), then injected ones;
        none within ``timeout_ms``: TIMEOUT."""
        if not isinstance(event_set, FakeEventSet) or event_set.freed:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        deadline = time.monotonic() + min(max(0, int(timeout_ms)) / 1000, MAX_WAIT_S)
        with self._xid_arrived:
            while True:
                event = self._next_event(event_set)
                if event is not None:
                    return event
                left = deadline - time.monotonic()
                if left <= 0:
                    nvml_error(pynvml.NVML_ERROR_TIMEOUT)
                due = self._next_due_in(event_set)
                self._xid_arrived.wait(left if due is None else min(left, due))

    def nvmlEventSetWait(self, event_set: FakeEventSet, timeout_ms: int) -> FakeEventData:
        return self.nvmlEventSetWait_v2(event_set, timeout_ms)

    @nvml_function("none")
    def nvmlEventSetFree(self, event_set: FakeEventSet) -> None:
        if not isinstance(event_set, FakeEventSet) or event_set.freed:
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        event_set.freed = True

    def _next_due_in(self, event_set: FakeEventSet) -> float | None:
        """Real seconds until the next undelivered scenario Xid of a registered GPU falls
        due; None where none will (none left, or the clock stands still)."""
        if self._frozen_time is not None:
            return None
        now = self.now()
        soonest: float | None = None
        for index, types in event_set.gpus.items():
            if not types & XID_CRITICAL_ERROR:
                continue
            left = event_set.scenario_delivered.get(index, 0)
            for due in self._scenario.gpus[index].health.xid_events:
                if left < due.count:
                    if due.at_s > now and (soonest is None or due.at_s < soonest):
                        soonest = due.at_s
                    break
                left -= due.count
        return None if soonest is None else max(0.0, soonest - now) / self._speed

    def _next_event(self, event_set: FakeEventSet) -> FakeEventData | None:
        now = self.now()
        for index in sorted(i for i, types in event_set.gpus.items() if types & XID_CRITICAL_ERROR):
            gpu = self._scenario.gpus[index]
            done = event_set.scenario_delivered.get(index, 0)
            seen = 0
            for due in gpu.health.xid_events:
                if due.at_s > now:
                    break
                if done < seen + due.count:
                    event_set.scenario_delivered[index] = done + 1
                    return FakeEventData(FakeDeviceHandle(index), XID_CRITICAL_ERROR, due.xid)
                seen += due.count
        injected = self._injected
        while event_set.injected_delivered < len(injected):
            gpu_index, kind, data = injected[event_set.injected_delivered]
            event_set.injected_delivered += 1
            if event_set.gpus.get(gpu_index, 0) & kind:
                return FakeEventData(FakeDeviceHandle(gpu_index), kind, data)
        return None


def _by_cause(cause: int, single: int, double: int) -> int:
    if cause == pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS:
        return single
    if cause == pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR:
        return double
    nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
