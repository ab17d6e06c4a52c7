"""One process's history for the dashboard (``H`` in the process table): its GPU memory over
a window and what the report says of it, from the history store (docs/history.md)."""

from __future__ import annotations

import math
import sqlite3
from dataclasses import field
from pathlib import Path

from gputop.core.history.report import CHECKED, ReportBy, ReportQuery, ReportRow, build_report
from gputop.core.history.store import HistoryError, open_for_reading
from gputop.core.records import frozen


@frozen
class ProcessHistory:
    pid: int
    since: float
    until: float
    memory_used_bytes: tuple[float | None, ...] = field(default_factory=tuple)
    """Its GPU memory (all its cards) in equal slices of the window; ``None``: not held."""
    summary: ReportRow | None = None
    problem: str | None = None


def read_process_history(
    path: Path, pid: int, start_time: float | None, window_s: float, now: float, columns: int
) -> ProcessHistory:
    since = now - window_s
    try:
        connection = open_for_reading(path)
    except HistoryError as error:
        return ProcessHistory(pid, since, now, problem=str(error))
    try:
        spans = connection.execute(
            "SELECT p.start_t, p.end_t, "
            f"{CHECKED.format('p.memory_byte_seconds')}, {CHECKED.format('p.memory_known_s')} "
            "FROM process_spans p JOIN processes r ON r.id = p.process_id "
            "WHERE r.pid = ? AND r.start_time IS ? AND p.end_t > ? AND p.start_t < ? "
            "AND p.start_t BETWEEN 0 AND 1e300 AND p.end_t BETWEEN p.start_t AND 1e300",
            (pid, start_time, since, now),
        ).fetchall()
        rows = build_report(connection, ReportQuery(since, now, ReportBy.PROCESS))
    except sqlite3.Error as error:
        return ProcessHistory(pid, since, now, problem=f"Cannot read {path}: {error}.")
    finally:
        connection.close()
    summary = next((row for row in rows if row.key == pid and row.start_time == start_time), None)
    return ProcessHistory(pid, since, now, _memory_columns(spans, since, now, columns), summary)


def _memory_columns(
    spans: list[tuple[float, float, float | None, float | None]],
    since: float,
    until: float,
    columns: int,
) -> tuple[float | None, ...]:
    """Each slice's memory: its spans' mean memory (added up where it held several cards at
    once), weighted by the part of the slice each covers, over the part it held any: a slice
    held in part shows what it held then, as a card's plot does, not that spread over it."""
    width = (until - since) / columns
    weighted = [0.0] * columns
    held: list[list[tuple[float, float]]] = [[] for _ in range(columns)]
    for start, end, byte_seconds, known_s in spans:
        mean = byte_seconds / known_s if byte_seconds is not None and known_s else None
        first = max(0, int((start - since) // width))
        last = min(columns - 1, int((end - since) // width))
        for column in range(first, last + 1):
            slice_start = since + column * width
            low, high = max(start, slice_start), min(end, slice_start + width)
            if high > low:
                held[column].append((low, high))
                if mean is not None:
                    weighted[column] += mean * (high - low)
    return tuple(
        weighted[column] / _covered(held[column]) if held[column] else None
        for column in range(columns)
    )


def _covered(intervals: list[tuple[float, float]]) -> float:
    """How long the union of ``intervals`` (each non-empty) lasts."""
    total, reach = 0.0, -math.inf
    for low, high in sorted(intervals):
        if high > reach:
            total += high - max(low, reach)
            reach = high
    return total
