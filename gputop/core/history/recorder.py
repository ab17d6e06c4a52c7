"""The recorder's loop: sample through the one sampler, write in batches, roll up, stop cleanly.

``stop`` is an event the command's SIGTERM and SIGINT handlers set: the loop then writes
what is pending and returns. Samples carry the backend's clock (a simulated scenario's runs
``settings.FAKE_SPEED`` times faster: the loop then waits ``interval_s / speed``). Batches
and roll-ups are timed on ``CLOCK_BOOTTIME``, never the wall clock: one stepped back a day
used to stop every write until it caught up; a step is said once and kept as a marker
(``clock_steps``). See docs/history.md, docs/faults.md.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import field

from gputop.core.history.retention import Retention, apply_retention
from gputop.core.history.writer import HistoryWriter
from gputop.core.model import Snapshot
from gputop.core.records import frozen
from gputop.core.units import duration

DEFAULT_INTERVAL_S = 5.0
DEFAULT_BATCH_S = 30.0
"""Samples are written at least this often (store time): what a SIGKILL may lose."""
MAX_GAP_INTERVALS = 3.0
MIN_GAP_S = 30.0
RETENTION_EVERY_S = 600.0
"""How often (store time) old samples are rolled up."""
MIN_STEP_S = 60.0
"""The least difference between the wall clock's advance and the monotonic clock's that is
taken for a step of the wall clock (smaller ones are a busy machine's jitter)."""
MAX_STEPS_SAID = 10
"""Steps said on stderr in one run; a clock that keeps stepping has the rest kept only."""


def steady_clock() -> float:
    """Seconds on a clock no one can set: CLOCK_BOOTTIME (a suspend counts), else monotonic."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return time.monotonic()


@frozen
class RecorderOptions:
    interval_s: float = DEFAULT_INTERVAL_S
    batch_s: float = DEFAULT_BATCH_S
    retention: Retention = field(default_factory=Retention)
    speed: float = 1.0
    """How many store seconds pass in a real second (``settings.FAKE_SPEED`` on simulated GPUs)."""
    max_samples: int | None = None
    """Stop after this many samples (None: until stopped)."""


class Recorder:
    def __init__(
        self,
        sample: Callable[[], Snapshot],
        writer: HistoryWriter,
        options: RecorderOptions,
        report: Callable[[str], None],
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._sample = sample
        self._writer = writer
        self._options = options
        self._report = report
        self._clock = clock or (lambda: steady_clock() * options.speed)
        """Store seconds on a clock no one can set (real seconds times ``speed``; a test's
        simulated clock)."""
        self._retention_failed = False
        self._steps = 0

    def run(self, stop: threading.Event) -> int:
        """Record until ``stop`` is set (or ``max_samples``); returns the samples taken."""
        options = self._options
        wait_s = options.interval_s / options.speed
        taken = 0
        previous: float | None = None
        previous_steady = 0.0
        last_flush: float | None = None
        last_retention: float | None = None
        counted: float | None = None
        next_at = time.monotonic()
        try:
            while not stop.is_set():
                snapshot = self._sample()
                now = snapshot.timestamp
                steady = self._clock()  # store seconds, never set back
                if previous is not None:
                    self._notice_step(previous, now, steady - previous_steady)
                counted = roll_up_time(counted, now, steady - previous_steady)
                self._writer.add(snapshot, sample_duration(previous, now, options.interval_s))
                previous, previous_steady = now, steady
                taken += 1
                if last_flush is None or steady - last_flush >= options.batch_s:
                    self._writer.flush()
                    last_flush = steady
                if last_retention is None:  # the first roll-up waits: a machine may start
                    last_retention = steady  # with its clock wrong until NTP sets it
                elif steady - last_retention >= RETENTION_EVERY_S:
                    self._apply_retention(counted)
                    last_retention = steady
                if options.max_samples is not None and taken >= options.max_samples:
                    break
                next_at += wait_s
                delay = next_at - time.monotonic()
                if delay < 0:  # fell behind (a slow sample, a suspended machine): no burst
                    next_at = time.monotonic()
                    delay = 0.0
                stop.wait(delay)
        finally:  # stopped, or an unexpected error: what was sampled is written first
            self._writer.flush()
        return taken

    def _notice_step(self, previous: float, now: float, steady_s: float) -> None:
        """The wall clock moved ``now - previous`` while ``steady_s`` really passed: a step
        beyond jitter is said once and kept in the store (with the next batch)."""
        step = (now - previous) - steady_s
        if abs(step) < max(MIN_STEP_S, 3 * self._options.interval_s):
            return
        self._writer.add_clock_step(now, step)
        self._steps += 1
        if self._steps > MAX_STEPS_SAID:
            return  # a clock that keeps stepping: kept in the store, not said every time
        way = "back" if step < 0 else "forward"
        more = (
            f" It stepped {MAX_STEPS_SAID} times: further steps are kept in the store "
            "(clock_steps) but not said."
            if self._steps == MAX_STEPS_SAID
            else ""
        )
        self._report(
            f"the clock stepped {way} by {duration(abs(step))} (between two samples); every "
            f"sample is kept, each with the time the clock gave it (docs/history.md).{more}"
        )

    def _apply_retention(self, now: float) -> None:
        connection = self._writer.connection
        if self._writer.pending or connection is None:  # rolled-up buckets must not be
            return  # written into afterwards; a store not open yet has nothing to roll up
        try:
            apply_retention(connection, now, self._options.retention)
        except sqlite3.Error as error:
            fault = self._writer.fault_of(error)
            if fault is not None:  # a full or read-only disk: said once, with the writes'
                self._writer.faults.failed(fault)
                return
            if not self._retention_failed:
                self._report(f"Rolling up old samples failed ({error}); will retry.")
            self._retention_failed = True
        else:
            self._retention_failed = False


def roll_up_time(counted: float | None, now: float, steady_s: float) -> float:
    """What is old is judged by the time the machine counted, never by a wall clock stepped
    ahead: the wall clock's ``now``, but no later than the last such time plus the
    ``steady_s`` that really passed since. A wall clock stepped forward two years would
    otherwise have rolled up every sample and deleted them as a year old; one stepped back
    is followed at once (it rolls up less, never more). docs/history.md."""
    if counted is None:
        return now
    return min(now, counted + steady_s)


def sample_duration(previous: float | None, now: float, interval_s: float) -> float:
    """The seconds a sample stands for: the time since the previous one, which a slow sample
    or a busy machine makes longer than the interval; the interval itself for the first
    sample and after a gap (a clock step, a suspended machine) longer than ``max_gap_s``."""
    if previous is None:
        return interval_s
    elapsed = now - previous
    if not 0 < elapsed <= max_gap_s(interval_s):
        return interval_s
    return elapsed


def max_gap_s(interval_s: float) -> float:
    """The longest time between two samples that still counts as recorded."""
    return max(MAX_GAP_INTERVALS * interval_s, MIN_GAP_S)
