"""Retention with roll-ups: full resolution, then 1-minute, then 1-hour, then nothing.

Only whole minutes (hours) are merged, so a bucket is never merged twice; a roll-up keeps
time-weighted means. Old process spans are merged into at most one per process, card and
day, their sums and idle runs keeping every figure of the report exact; Xids and health
counters are kept as recorded until deleted. See docs/history.md.
"""

from __future__ import annotations

import math
import operator
import sqlite3
from collections.abc import Callable
from typing import Any

from gputop.core.history.schema import ACTIVITY_COLUMNS, DAY, HOUR, MINUTE, RAW
from gputop.core.history.spans import SAME_TIME_S, decode_runs, encode_runs, keep_run
from gputop.core.numbers import LATEST_TIME_S, MAX_ID, whole_within, within
from gputop.core.records import frozen
from gputop.core.sqlite_files import immediate


@frozen
class Retention:
    full_s: float = 48 * 3600.0
    """Raw samples are kept this long (48 h)."""
    minute_s: float = 30 * 86400.0
    """1-minute roll-ups are kept this long (30 days)."""
    hour_s: float = 365 * 86400.0
    """1-hour roll-ups are kept this long (a year)."""


def _weighted(column: str, weight: str, integer: bool = False) -> str:
    """The time-weighted mean of ``column`` over the rows where it is known."""
    mean = f"SUM({column} * {weight}) / SUM(CASE WHEN {column} IS NOT NULL THEN {weight} END)"
    return f"CAST(ROUND({mean}) AS INTEGER)" if integer else mean


def apply_retention(connection: sqlite3.Connection, now: float, retention: Retention) -> None:
    """Roll up and delete what ``retention`` says is too old at ``now``, in one transaction."""
    with immediate(connection):
        _roll_up(connection, RAW, MINUTE, now - retention.full_s)
        _merge_spans(connection, now - retention.full_s)
        _roll_up(connection, MINUTE, HOUR, now - retention.minute_s)
        _delete_before(connection, HOUR, now - retention.hour_s)


def _roll_up(connection: sqlite3.Connection, source: int, target: int, older_than: float) -> None:
    cutoff = math.floor(older_than / target) * target  # whole buckets only
    execute = connection.execute
    execute("DROP TABLE IF EXISTS temp.rolled")
    execute("DROP TABLE IF EXISTS temp.buckets")
    execute(
        "CREATE TEMP TABLE rolled AS SELECT id AS sample_id, "
        "CAST(t / ? AS INTEGER) AS bucket, t, duration_s FROM samples "
        "WHERE resolution_s = ? AND t < ?",
        (target, source, cutoff),
    )
    if execute("SELECT COUNT(*) FROM temp.rolled").fetchone()[0] == 0:
        return
    execute(
        "CREATE TEMP TABLE buckets "
        "(bucket INTEGER PRIMARY KEY, new_id INTEGER, seconds REAL, last_t REAL)"
    )
    execute(
        "INSERT INTO temp.buckets (bucket, seconds, last_t) "
        "SELECT bucket, SUM(duration_s), MAX(t) FROM temp.rolled GROUP BY bucket"
    )
    for bucket, seconds, last_t in execute(
        "SELECT bucket, seconds, last_t FROM temp.buckets"
    ).fetchall():
        cursor = execute(  # like every sample, it ends at its t (docs/history.md)
            "INSERT INTO samples (t, duration_s, resolution_s) VALUES (?, ?, ?)",
            (last_t, seconds, target),
        )
        execute("UPDATE temp.buckets SET new_id = ? WHERE bucket = ?", (cursor.lastrowid, bucket))
    d = "r.duration_s"
    execute(
        "INSERT INTO gpu_samples SELECT b.new_id, g.physical_index, MAX(g.uuid_id), "
        f"{_weighted('g.utilization_gpu_percent', d)}, "
        f"{_weighted('g.memory_used_bytes', d, integer=True)}, MAX(g.memory_total_bytes), "
        f"{_weighted('g.power_w', d)}, {_weighted('g.temperature_c', d)}, "
        + ", ".join(_weighted(f"g.{column}", d) for column in ACTIVITY_COLUMNS)
        + " "
        "FROM temp.rolled r JOIN gpu_samples g ON g.sample_id = r.sample_id "
        "JOIN temp.buckets b ON b.bucket = r.bucket GROUP BY b.new_id, g.physical_index"
    )
    execute("DELETE FROM gpu_samples WHERE sample_id IN (SELECT sample_id FROM temp.rolled)")
    execute("DELETE FROM samples WHERE id IN (SELECT sample_id FROM temp.rolled)")
    execute("DROP TABLE temp.rolled")
    execute("DROP TABLE temp.buckets")


def _delete_before(connection: sqlite3.Connection, resolution: int, before: float) -> None:
    old = "SELECT id FROM samples WHERE resolution_s = ? AND t < ?"
    connection.execute(f"DELETE FROM gpu_samples WHERE sample_id IN ({old})", (resolution, before))
    connection.execute("DELETE FROM samples WHERE resolution_s = ? AND t < ?", (resolution, before))
    connection.execute("DELETE FROM claim_spans WHERE end_t < ?", (before,))
    connection.execute("DELETE FROM health_counters WHERE t < ?", (before,))
    old_xids = "SELECT id FROM xid_events WHERE last_t < ?"
    connection.execute(f"DELETE FROM xid_processes WHERE event_id IN ({old_xids})", (before,))
    deleted = connection.execute("DELETE FROM xid_events WHERE last_t < ?", (before,)).rowcount
    deleted += connection.execute("DELETE FROM process_spans WHERE end_t < ?", (before,)).rowcount
    if deleted > 0:  # processes seen only in what was deleted
        connection.execute(
            "DELETE FROM processes WHERE id NOT IN (SELECT process_id FROM process_spans) "
            "AND id NOT IN (SELECT process_id FROM xid_processes)"
        )


_SUM_NAMES = "held_s samples memory_byte_seconds memory_known_s sm_percent_seconds sm_known_s"
_SPAN_SUMS = _SUM_NAMES.split()


def _merge_spans(connection: sqlite3.Connection, older_than: float) -> None:
    """Spans that ended before ``older_than``: adjacent ones of a process on a card that
    start on the same (UTC) day become one (marked ``resolution_s`` 86400), their idle runs
    joined (spans.py). The report over a month then reads a row per process and day."""
    columns = "id, process_id, physical_index, start_t, end_t, idle_runs, peak_memory_bytes, "
    select = f"SELECT {columns}{', '.join(_SPAN_SUMS)} FROM process_spans "
    found = [
        row
        for row in connection.execute(
            select + "WHERE resolution_s = 0 AND end_t < ?", (older_than,)
        )
        if _mergeable(row)
    ]
    if not found:
        return
    # The recorder merges every 10 minutes: what ended since then continues the day's span
    # merged last time, which ends where the earliest of them starts (or later).
    earliest = min(float(row[3]) for row in found)
    found += [
        row
        for row in connection.execute(
            select + "WHERE resolution_s = ? AND end_t >= ? AND end_t < ?",
            (DAY, earliest - SAME_TIME_S, older_than),
        )
        if _mergeable(row)
    ]
    found.sort(key=lambda row: (row[1], row[2], row[3]))
    merged: list[list[Any]] = []
    runs: list[list[tuple[float, float]]] = []
    originals: list[tuple[int]] = []
    for row in found:
        originals.append((row[0],))
        start, end = float(row[3]), float(row[4])
        own_runs = decode_runs(row[5], end - start)
        last = merged[-1] if merged else None
        if (
            last is not None
            and last[1] == row[1]
            and last[2] == row[2]
            and abs(last[4] - start) < SAME_TIME_S
            and math.floor(last[3] / DAY) == math.floor(start / DAY)
        ):
            shift = start - last[3]
            joined = runs[-1]
            for offset, length in own_runs:
                if joined and offset < 1e-6 and abs(sum(joined[-1]) - shift) < 1e-3:
                    joined[-1] = (joined[-1][0], joined[-1][1] + length)
                else:
                    joined.append((offset + shift, length))
            last[4] = end
            last[6] = _combined(last[6], row[6], max)
            for offset in range(len(_SPAN_SUMS)):
                last[7 + offset] = _combined(last[7 + offset], row[7 + offset], operator.add)
        else:
            merged.append([row[0], row[1], row[2], start, end, None, *row[6:]])
            runs.append(list(own_runs))
    for row, row_runs in zip(merged, runs, strict=True):
        span_s = row[4] - row[3]
        row[5] = encode_runs([run for run in row_runs if keep_run(*run, span_s)])
    connection.executemany("DELETE FROM process_spans WHERE id = ?", originals)
    connection.executemany(
        "INSERT INTO process_spans (process_id, physical_index, start_t, end_t, idle_runs, "
        f"peak_memory_bytes, {', '.join(_SPAN_SUMS)}, resolution_s) "
        f"VALUES ({', '.join('?' * (6 + len(_SPAN_SUMS)))}, {DAY})",
        [row[1:] for row in merged],
    )


def _mergeable(row: tuple[Any, ...]) -> bool:
    """A span as the recorder writes it: whole ids and a card index, times from 1970 to
    9999 that end after they start, figures that are finite numbers or NULL (its idle runs
    are read as ``decode_runs`` reads any text). Another is a row changed by hand (text, a
    blob, infinity): left as it is, never merged, and never the end of the roll-up (the
    recorder's, every 10 minutes)."""
    span_id, process_id, index, start, end = row[:5]
    return (
        whole_within(span_id, 1, MAX_ID)
        and whole_within(process_id, 1, MAX_ID)
        and whole_within(index, 0, MAX_ID)
        and within(start, 0, LATEST_TIME_S)
        and within(end, start, LATEST_TIME_S)
        and all(value is None or within(value, 0, math.inf) for value in row[6:])
    )


def _combined(first: Any, second: Any, combine: Callable[[Any, Any], Any]) -> Any:
    """Two spans' figure: ``combine`` of both, or the one that is known."""
    if first is None:
        return second
    if second is None:
        return first
    return combine(first, second)
