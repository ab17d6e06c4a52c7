"""Process spans: a run of consecutive samples in which one process held one card.

The writer keeps one open span per (process, card) and extends it with each sample; a span
ends when the process leaves the card, after a gap in the recording, or at ``SPAN_MAX_S``.
Where the process was idle inside it is kept as ``idle_runs`` ("offset+length" pairs from
the span's start, joined by ";"): only runs of at least ``MIN_IDLE_RUN_S``, or that touch
the span's start or end (they may go on in the next span), so an SM % that flickers around
the idle bound costs nothing. See docs/history.md.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping
from dataclasses import field

from gputop.core.records import mutable

IDLE_SM_PERCENT = 5.0
SPAN_MAX_S = 15 * 60.0
"""A span is cut at this length: the resolution of one process's memory over time."""
MIN_IDLE_RUN_S = 60.0
"""Shorter idle stretches inside a span are not kept: ``--idle-min`` is at least this."""
MAX_RUNS_TEXT = 65536
SAME_TIME_S = 1e-6
"""Two span ends this close are the same moment (the writer's, the report's and retention's
rule)."""


def is_idle(memory_bytes: float | None, sm_percent: float | None) -> bool:
    """Holding memory (or a context whose memory NVML does not report) with SM under 5 %;
    an unknown SM % is never idle."""
    return (
        sm_percent is not None
        and sm_percent < IDLE_SM_PERCENT
        and (memory_bytes is None or memory_bytes > 0)
    )


def encode_runs(runs: list[tuple[float, float]]) -> str:
    return ";".join(f"{offset:.3f}+{length:.3f}" for offset, length in runs)


def decode_runs(text: object, span_s: float) -> list[tuple[float, float]]:
    """Idle runs read back from the store: well-formed, finite, inside the span, in order;
    anything else is no run (a damaged row never invents idle time)."""
    if not isinstance(text, str) or not text or len(text) > MAX_RUNS_TEXT:
        return []
    runs: list[tuple[float, float]] = []
    last_end = 0.0
    for part in text.split(";"):
        offset_text, plus, length_text = part.partition("+")
        try:
            offset, length = float(offset_text), float(length_text)
        except ValueError:
            return []
        if not plus or not (math.isfinite(offset) and math.isfinite(length)):
            return []
        if offset < last_end - SAME_TIME_S or length <= 0 or offset + length > span_s + 1e-3:
            return []
        runs.append((offset, length))
        last_end = offset + length
    return runs


def keep_run(offset: float, length: float, span_s: float) -> bool:
    touches_edge = offset < SAME_TIME_S or abs(offset + length - span_s) < 1e-3
    return length >= MIN_IDLE_RUN_S or touches_edge


@mutable(slots=True)
class OpenSpan:
    process_id: int
    physical_index: int
    start_t: float
    end_t: float
    held_s: float = 0.0
    samples: int = 0
    memory_byte_seconds: float | None = None
    memory_known_s: float = 0.0
    peak_memory_bytes: int | None = None
    sm_percent_seconds: float | None = None
    sm_known_s: float = 0.0
    runs: list[tuple[float, float]] = field(default_factory=list)
    idle_from: float | None = None
    """Where the idle run going on at the span's end began (absolute seconds)."""
    row_id: int | None = None
    dirty: bool = True

    def continues(self, sample_start: float) -> bool:
        return (
            abs(sample_start - self.end_t) < SAME_TIME_S and self.end_t - self.start_t < SPAN_MAX_S
        )

    def add(
        self,
        end_t: float,
        duration_s: float,
        memory: int | None,
        sm: int | None,
        *,
        idle_sm: float | None = None,
    ) -> None:
        """One sample; ``idle_sm``: the card's GPM SM active where the process is alone on
        it, which judges idleness instead of its own SM % (docs/activity.md)."""
        start = end_t - duration_s
        if is_idle(memory, sm if idle_sm is None else idle_sm):
            if self.idle_from is None:
                self.idle_from = start
        elif self.idle_from is not None:
            offset, length = self.idle_from - self.start_t, start - self.idle_from
            if length > 0 and (length >= MIN_IDLE_RUN_S or offset < SAME_TIME_S):
                self.runs.append((offset, length))
            self.idle_from = None
        self.end_t = end_t
        self.held_s += duration_s
        self.samples += 1
        if memory is not None:
            self.memory_byte_seconds = (self.memory_byte_seconds or 0.0) + memory * duration_s
            self.memory_known_s += duration_s
            self.peak_memory_bytes = max(memory, self.peak_memory_bytes or 0)
        if sm is not None:
            self.sm_percent_seconds = (self.sm_percent_seconds or 0.0) + sm * duration_s
            self.sm_known_s += duration_s
        self.dirty = True

    def idle_runs(self) -> list[tuple[float, float]]:
        """The kept runs, and the one going on at the end (it touches the end)."""
        if self.idle_from is None or self.end_t <= self.idle_from:
            return list(self.runs)
        return [*self.runs, (self.idle_from - self.start_t, self.end_t - self.idle_from)]

    def save(self, connection: sqlite3.Connection) -> None:
        changing = {name: getattr(self, name) for name in _CHANGING}
        changing["idle_runs"] = encode_runs(self.idle_runs())
        fixed = {"process_id": self.process_id, "physical_index": self.physical_index}
        self.row_id = save_span(connection, "process_spans", self.row_id, changing, fixed)
        self.dirty = False


_CHANGING = (
    "start_t", "end_t", "held_s", "samples", "memory_byte_seconds", "memory_known_s",
    "peak_memory_bytes", "sm_percent_seconds", "sm_known_s",
)  # fmt: skip
"""The columns of a process span that a sample changes (and ``idle_runs``)."""


def save_span(
    connection: sqlite3.Connection,
    table: str,
    row_id: int | None,
    changing: Mapping[str, object],
    fixed: Mapping[str, object],
) -> int:
    """A span's row: inserted with its ``fixed`` columns the first time (its new id
    returned), else its ``changing`` ones updated."""
    if row_id is not None:
        sets = ", ".join(f"{name} = ?" for name in changing)
        connection.execute(f"UPDATE {table} SET {sets} WHERE id = ?", (*changing.values(), row_id))
        return row_id
    columns = {**fixed, **changing}
    cursor = connection.execute(
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
        tuple(columns.values()),
    )
    return int(cursor.lastrowid or 0)
