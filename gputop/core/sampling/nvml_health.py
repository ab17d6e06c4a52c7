"""Health readings of each GPU: ECC counts, retired pages, remapped rows, PCIe replays,
NVLink CRC errors, and the Xids NVML's event set and the kernel log report (docs/health.md).

The counters cost up to 40 NVML calls a card, so they are read every ``period_s``, not on
every sample; a refused call (NO_PERMISSION) is named once in ``GpuHealth.refused`` and not
asked again. Xids come from an NVML event set on a thread of its own (``gputop-xid``) that
blocks in ``nvmlEventSetWait_v2`` and never delays a sample; every Xid is counted exactly,
repeats of one code coalesced (at most ``XID_EVENTS_KEPT`` events a GPU), and the kernel
log's records (kmsg_xid.py) counted with them, an Xid both report within ``XID_MATCH_S``
once. An ECC error event makes the next sample read that card's counters again.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import field, replace
from typing import Any

from gputop.core.model import EccCounts, GpuHealth, RemappedRows, RetiredPages, XidEvent
from gputop.core.records import mutable
from gputop.core.sampling.kmsg_xid import BusKey, KernelLogReader
from gputop.core.sampling.nvml_fields import FieldReader, GpuLostError

HEALTH_PERIOD_S = 10.0
"""How often the counters are read again (they change rarely)."""
XID_EVENTS_KEPT = 32
"""Recent Xid events kept per GPU (a coalesced run of one code is one event)."""
XID_DRAIN_AT_START = 4096
"""At most this many queued events are taken before the first sample; the thread the rest."""
XID_WAIT_MS = 5000
"""How long the thread blocks in one wait: how soon it sees that it is to stop. An event ends
the wait at once; each timeout wakes the thread, and on a virtual machine a wake-up from a
long sleep costs 0.1-0.2 ms of CPU (docs/speed.md): at 500 ms that was 3 % of the dashboard's."""
XID_RETRY_S = 1.0
"""After an error other than a timeout, the thread tries again this much later."""
XID_EVENT_TYPE = 0x8
"""nvmlEventTypeXidCriticalError."""
ECC_EVENT_TYPES = 0x1 | 0x2
"""nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError: registered apart from the
Xid, since NVML refuses a whole registration for one type the card lacks (GeForce: no ECC)."""
XID_MATCH_S = 5.0
"""An Xid the kernel log and the event set both report, this close in time, counts once."""
XID_MATCH_KEPT = 100_000
"""Reports of one Xid kept for matching: a storm's worth of seconds."""
NVML_EVENTS = "nvml events"
KERNEL_LOG = "kernel log"


@mutable(slots=True)
class _GpuHealthState:
    reading: GpuHealth | None = None
    read_at: float | None = None
    events: deque[XidEvent] = field(default_factory=lambda: deque(maxlen=XID_EVENTS_KEPT))
    counts: dict[int, int] = field(default_factory=dict)
    registered: bool = False
    stale: bool = False
    """An ECC event came: read the counters again at the next sample."""
    unmatched: dict[tuple[int, str], deque[float]] = field(default_factory=dict)
    """(Xid, source) -> times of its reports the other source has not matched yet."""
    changes: int = 0
    """Xids counted so far (under the lock): what was shown is shown again until it moves."""
    shown: tuple[GpuHealth, tuple[Any, ...], GpuHealth] | None = None
    """What ``_with_events`` made last, from which reading and which state of the rest: the
    same health while nothing changed."""


class HealthReader:
    """Reads and keeps each GPU's health. The counters are read by one sampler thread; the
    Xid thread counts events under a lock."""

    def __init__(
        self,
        nvml: Any,
        reader: FieldReader,
        *,
        period_s: float = HEALTH_PERIOD_S,
    ) -> None:
        self._nvml = nvml
        self._reader = reader
        self._period_s = period_s
        self._gpus: dict[int, _GpuHealthState] = {}
        self._refused: set[str] = set()
        self._missing: set[str] = set()
        self._event_set: Any = None
        self._events_open = True
        """False once the event set cannot be made: no Xid source."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._kernel_log: KernelLogReader | None = None
        self._kernel_log_buses: dict[BusKey, int] = {}
        self._matching = False
        """Both sources may report one Xid: match them (set before either starts)."""

    # -- the event set ---------------------------------------------------------------

    def open_gpu(self, index: int, handle: Any) -> None:
        """Register the GPU for Xid events (the set is made with the first GPU)."""
        state = self._gpus.setdefault(index, _GpuHealthState())
        if not self._events_open:
            return
        nvml = self._nvml
        if self._event_set is None:
            self._event_set = self._call("nvmlEventSetCreate")
            if self._event_set is None:
                self._events_open = False
                return
        with contextlib.suppress(Exception):  # NOT_SUPPORTED (no ECC), NO_PERMISSION
            nvml.nvmlDeviceRegisterEvents(handle, ECC_EVENT_TYPES, self._event_set)
        try:
            nvml.nvmlDeviceRegisterEvents(handle, XID_EVENT_TYPE, self._event_set)
        except Exception:  # NOT_SUPPORTED, NO_PERMISSION: no Xid source for this card
            return
        state.registered = True

    def start(self, clock: Callable[[], float], index_of: Callable[[Any], int | None]) -> None:
        """Take the events already queued, then watch for more on the Xid thread.
        ``index_of`` maps an event's device handle to the GPU's physical index; ``clock``
        stamps each event."""
        if self._event_set is None or self._thread is not None:
            return
        for _ in range(XID_DRAIN_AT_START):
            if not self._take(0, clock, index_of):
                break
        self._thread = threading.Thread(
            target=self._watch, args=(clock, index_of), name="gputop-xid", daemon=True
        )
        self._thread.start()

    def start_kernel_log(self, path: str, buses: dict[BusKey, int]) -> None:
        """Read the kernel log's Xid records too (``buses``: each GPU's bus -> its index);
        where it cannot be read, every card's ``refused`` names it."""
        self._kernel_log_buses = buses
        self._matching = any(state.registered for state in self._gpus.values())
        reader = KernelLogReader(self._kernel_xid, path)
        if reader.start():
            self._kernel_log = reader
        else:
            self._matching = False
            if reader.problem is not None:
                self._refused.add(f"kernel log ({reader.problem})")

    def _kernel_xid(self, bus: BusKey, xid: int, when: float) -> None:
        index = self._kernel_log_buses.get(bus)
        if index is not None:
            self.count_xid(index, xid, when, KERNEL_LOG)

    def count_xid(self, index: int, xid: int, when: float, source: str) -> None:
        """Count one Xid of GPU ``index`` from ``source``; one the other source reported
        within ``XID_MATCH_S`` is the same Xid, counted already."""
        state = self._gpus.get(index)
        if state is None:
            return
        with self._lock:
            if self._matching and state.registered:
                other = KERNEL_LOG if source == NVML_EVENTS else NVML_EVENTS
                seen = state.unmatched.get((xid, other))
                while seen and seen[0] < when - XID_MATCH_S:
                    seen.popleft()
                if seen and abs(seen[0] - when) <= XID_MATCH_S:
                    seen.popleft()
                    return
                mine = state.unmatched.setdefault((xid, source), deque(maxlen=XID_MATCH_KEPT))
                mine.append(when)
            self._count(state, xid, when)

    def close(self) -> None:
        """Stop the Xid thread. It holds its own reference on NVML (nvmlInit) and frees the
        set and that reference itself within ``XID_WAIT_MS``, so closing never waits for it."""
        self._stop.set()
        if self._kernel_log is not None:
            self._kernel_log.close()
        if self._thread is None and self._event_set is not None:
            self._call("nvmlEventSetFree", self._event_set)
            self._event_set = None

    def _watch(self, clock: Callable[[], float], index_of: Callable[[Any], int | None]) -> None:
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except Exception:  # NVML is gone already: nothing to watch
            return
        try:
            while not self._stop.is_set():
                try:
                    self._take(XID_WAIT_MS, clock, index_of, quiet=False)
                except Exception:  # not a timeout: the driver is unwell; try again later
                    self._stop.wait(XID_RETRY_S)
        finally:
            event_set, self._event_set = self._event_set, None
            with contextlib.suppress(Exception):  # closing down: nothing to tell
                nvml.nvmlEventSetFree(event_set)
            with contextlib.suppress(Exception):
                nvml.nvmlShutdown()

    def _take(
        self,
        timeout_ms: int,
        clock: Callable[[], float],
        index_of: Callable[[Any], int | None],
        *,
        quiet: bool = True,
    ) -> bool:
        """Wait up to ``timeout_ms`` for one event and count it; False on a timeout.
        Other errors are False when ``quiet``, raised otherwise."""
        nvml = self._nvml
        try:
            data = nvml.nvmlEventSetWait_v2(self._event_set, timeout_ms)
        except nvml.NVMLError_Timeout:
            return False
        except Exception:
            if quiet:
                return False
            raise
        kind = int(data.eventType)
        index = index_of(data.device)
        if index is None:
            return True
        if kind & ECC_EVENT_TYPES and index in self._gpus:
            self._gpus[index].stale = True
        if kind & XID_EVENT_TYPE:
            self.count_xid(index, int(data.eventData), clock(), NVML_EVENTS)
        return True

    @staticmethod
    def _count(state: _GpuHealthState, xid: int, now: float) -> None:
        state.changes += 1
        state.counts[xid] = state.counts.get(xid, 0) + 1
        if state.events and state.events[-1].xid == xid:
            last = state.events[-1]
            state.events[-1] = replace(last, count=last.count + 1)
        else:
            state.events.append(XidEvent(xid=xid, time=now))

    # -- the counters ----------------------------------------------------------------

    def read(self, index: int, handle: Any, now: float, nvlink_count: int | None) -> GpuHealth:
        """The GPU's health at ``now``: the counters read again when ``period_s`` has
        passed since the last reading, the Xids as they stand. Raises GpuLostError."""
        state = self._gpus.setdefault(index, _GpuHealthState())
        due = state.read_at is None or now - state.read_at >= self._period_s
        if state.reading is None or due or state.stale:
            state.stale = False  # before the reading: an event during it reads once more
            state.reading = self._counters(handle, nvlink_count)
            state.read_at = now
        return self._with_events(state, state.reading)

    def last(self, index: int) -> GpuHealth | None:
        """What was known of a GPU that can no longer be asked (lost): its last counters and
        every Xid since, ``None`` if it was never read."""
        state = self._gpus.get(index)
        if state is None or state.reading is None:
            return None
        return self._with_events(state, state.reading)

    def _with_events(self, state: _GpuHealthState, reading: GpuHealth) -> GpuHealth:
        """``reading`` with the Xids as they stand; the very object of the last call where
        neither the reading nor the Xids, the refusals or the sources changed (most samples:
        eight cards' health made anew every second cost more than the rest of it)."""
        kernel_log = self._kernel_log is not None
        with self._lock:
            key = (state.read_at, state.changes, len(self._refused), kernel_log, state.registered)
            shown = state.shown
            if shown is not None and shown[0] is reading and shown[1] == key:
                return shown[2]
            events = tuple(state.events)
            counts = tuple(sorted(state.counts.items()))
        sources: tuple[str, ...] = (NVML_EVENTS,) if state.registered else ()
        if kernel_log:
            sources += (KERNEL_LOG,)
        health = replace(
            reading,
            xid_events=events if sources else None,
            xid_sources=sources,
            xid_counts=counts,
            refused=tuple(sorted(self._refused)),
            read_at=state.read_at,
        )
        state.shown = (reading, key, health)
        return health

    def _counters(self, handle: Any, nvlink_count: int | None) -> GpuHealth:
        nvml = self._nvml
        corrected = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
        uncorrected = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        volatile = getattr(nvml, "NVML_VOLATILE_ECC", 0)
        aggregate = getattr(nvml, "NVML_AGGREGATE_ECC", 1)
        ecc = EccCounts(
            corrected_volatile=self._int(
                "nvmlDeviceGetTotalEccErrors", handle, corrected, volatile
            ),
            uncorrected_volatile=self._int(
                "nvmlDeviceGetTotalEccErrors", handle, uncorrected, volatile
            ),
            corrected_aggregate=self._int(
                "nvmlDeviceGetTotalEccErrors", handle, corrected, aggregate
            ),
            uncorrected_aggregate=self._int(
                "nvmlDeviceGetTotalEccErrors", handle, uncorrected, aggregate
            ),
        )
        return GpuHealth(
            ecc=ecc if ecc.known() else None,
            retired_pages=self._retired_pages(handle),
            remapped_rows=self._remapped_rows(handle),
            pcie_replays=self._int("nvmlDeviceGetPcieReplayCounter", handle),
            nvlink_crc_errors=self._nvlink_crc(handle, nvlink_count),
        )

    def _retired_pages(self, handle: Any) -> RetiredPages | None:
        nvml = self._nvml
        causes = (
            getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
            getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1),
        )
        single, double = (self._page_count(handle, cause) for cause in causes)
        pending = self._call("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        pages = RetiredPages(
            single_bit=single,
            double_bit=double,
            pending=None if pending is None else _flag(pending),
        )
        return pages if pages.known() else None

    def _page_count(self, handle: Any, cause: int) -> int | None:
        for function in ("nvmlDeviceGetRetiredPages_v2", "nvmlDeviceGetRetiredPages"):
            if function in self._missing:
                continue
            pages = self._call(function, handle, cause)
            if pages is not None:
                try:
                    return len(pages)
                except TypeError:
                    return None
            if function not in self._missing:
                return None
        return None

    def _remapped_rows(self, handle: Any) -> RemappedRows | None:
        rows = self._call("nvmlDeviceGetRemappedRows", handle)
        if rows is None:
            return None
        try:
            correctable, uncorrectable, pending, failed = rows
            return RemappedRows(
                correctable=_count(correctable),
                uncorrectable=_count(uncorrectable),
                pending=_flag(pending),
                failed=_flag(failed),
            )
        except (TypeError, ValueError, OverflowError):
            return None

    def _nvlink_crc(self, handle: Any, nvlink_count: int | None) -> int | None:
        """CRC (flit) errors summed over the links NVML says are active; ``None`` without
        an active link or without the counter."""
        if not nvlink_count:
            return None
        nvml = self._nvml
        enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
        crc_flit = getattr(nvml, "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2)
        total: int | None = None
        for link in range(nvlink_count):
            state = self._call("nvmlDeviceGetNvLinkState", handle, link)
            if state is None or int(state) != enabled:
                continue
            errors = self._int("nvmlDeviceGetNvLinkErrorCounter", handle, link, crc_flit)
            if errors is not None:
                total = (total or 0) + errors
        return total

    # -- calls -------------------------------------------------------------------------

    def _int(self, function: str, *args: Any) -> int | None:
        value = self._call(function, *args)
        if value is None:
            return None
        try:
            return _count(value)
        except (TypeError, ValueError, OverflowError):
            return None

    def _call(self, function: str, *args: Any) -> Any | None:
        """``nvml.<function>(*args)`` or ``None``, as FieldReader.read, and a refusal
        (NO_PERMISSION) remembered so that it is named once and not asked again."""
        if function in self._refused or function in self._missing:
            return None
        nvml = self._nvml
        fn = getattr(nvml, function, None)
        if fn is None or not self._reader.has(function):
            self._missing.add(function)
            return None
        mismatch = getattr(nvml, "NVMLLibraryMismatchError", nvml.NVMLError_FunctionNotFound)
        try:
            return fn(*args)
        except nvml.NVMLError_NoPermission:
            self._refused.add(function)
            return None
        except nvml.NVMLError_GpuIsLost as error:
            raise GpuLostError(function) from error
        except (nvml.NVMLError_FunctionNotFound, mismatch):
            self._missing.add(function)
            return None
        except Exception:  # unsupported, or a binding's odd failure: this reading only
            return None


def handle_key(handle: Any) -> Any:
    """What identifies a device handle: the address a real one (a ctypes pointer) points
    at, so an event's handle matches the one the GPU was opened with; a fake's handle
    itself."""
    try:
        return ctypes.addressof(handle.contents)
    except (AttributeError, TypeError, ValueError):
        try:
            hash(handle)
        except TypeError:
            return id(handle)
        return handle


def _count(value: Any) -> int:
    number = int(value)
    if number < 0:
        raise ValueError(number)
    return number


def _flag(value: Any) -> bool:
    return bool(int(value))
