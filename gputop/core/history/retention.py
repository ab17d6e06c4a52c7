"""Retention with roll-ups: full resolution, then 1-minute, then 1-hour, then nothing.

Samples older than ``full_s`` are merged into one sample per minute, minute samples older
than ``minute_s`` into one per hour, and hour samples older than ``hour_s`` are deleted. A
roll-up keeps what the report needs: the seconds each process held each card (``held_s``),
time-weighted means of memory, SM % and the GPU readings, and the peak memory. Only whole
minutes (hours) are merged, so a bucket is never merged twice. See docs/history.md.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from dataclasses import dataclass

from gputop.core.history.schema import HOUR, MINUTE, RAW


@dataclass(frozen=True, slots=True)
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
    connection.execute("BEGIN IMMEDIATE")
    try:
        _roll_up(connection, RAW, MINUTE, now - retention.full_s)
        _roll_up(connection, MINUTE, HOUR, now - retention.minute_s)
        _delete_before(connection, HOUR, now - retention.hour_s)
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


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
        f"{_weighted('g.power_w', d)}, {_weighted('g.temperature_c', d)} "
        "FROM temp.rolled r JOIN gpu_samples g ON g.sample_id = r.sample_id "
        "JOIN temp.buckets b ON b.bucket = r.bucket GROUP BY b.new_id, g.physical_index"
    )
    h = "COALESCE(p.held_s, r.duration_s)"
    execute(
        "INSERT INTO process_samples (sample_id, physical_index, process_id, memory_bytes, "
        "sm_util_percent, held_s, peak_memory_bytes) "
        f"SELECT b.new_id, p.physical_index, p.process_id, "
        f"{_weighted('p.memory_bytes', h, integer=True)}, {_weighted('p.sm_util_percent', h)}, "
        f"SUM({h}), MAX(COALESCE(p.peak_memory_bytes, p.memory_bytes)) "
        "FROM temp.rolled r JOIN process_samples p ON p.sample_id = r.sample_id "
        "JOIN temp.buckets b ON b.bucket = r.bucket "
        "GROUP BY b.new_id, p.physical_index, p.process_id"
    )
    execute("DELETE FROM gpu_samples WHERE sample_id IN (SELECT sample_id FROM temp.rolled)")
    execute("DELETE FROM process_samples WHERE sample_id IN (SELECT sample_id FROM temp.rolled)")
    execute("DELETE FROM samples WHERE id IN (SELECT sample_id FROM temp.rolled)")
    execute("DROP TABLE temp.rolled")
    execute("DROP TABLE temp.buckets")


def _delete_before(connection: sqlite3.Connection, resolution: int, before: float) -> None:
    old = "SELECT id FROM samples WHERE resolution_s = ? AND t < ?"
    connection.execute(f"DELETE FROM gpu_samples WHERE sample_id IN ({old})", (resolution, before))
    connection.execute(
        f"DELETE FROM process_samples WHERE sample_id IN ({old})", (resolution, before)
    )
    deleted = connection.execute(
        "DELETE FROM samples WHERE resolution_s = ? AND t < ?", (resolution, before)
    ).rowcount
    if deleted > 0:  # processes seen only in what was deleted
        connection.execute(
            "DELETE FROM processes WHERE id NOT IN (SELECT process_id FROM process_samples)"
        )
