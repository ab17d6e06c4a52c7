"""Writing each card's Xids and health counters into the history store (schema version 3).

A sample carries a card's recent Xid events (a run of one code coalesced into one event
with its count, at most 32 kept) and every Xid counted since gputop started
(``xid_counts``, exact). What arrived since the previous sample is the rise of each code's
count: the events say when (a new event: its own time; more of a run the previous sample
saw already: the time of this sample, to within one sample), and what they no longer hold
is placed at this sample's time, so the count recorded is exactly the count. The rows are
one per (card, Xid, minute): a storm of thousands of Xid 13 a second is one row a minute.

On a card's first sample of a recorder's run the events it holds are recorded with their
times, except those at or before the last Xid the store already has of that card (an earlier
run recorded them: the kernel log holds records from boot). See docs/health.md and
docs/history.md.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from dataclasses import field

from gputop.core.history.schema import HEALTH_COLUMNS, MINUTE
from gputop.core.model import GpuHealth, GpuSample
from gputop.core.numbers import LATEST_TIME_S
from gputop.core.records import mutable

MAX_CACHED_ROWS = 1000
"""Row ids remembered (each further one is looked up in the store)."""

Key = tuple[int, int | None]
"""A card in the store: its physical index and the id of its uuid's string."""


@mutable(slots=True)
class _Seen:
    """What the previous sample of a card said of its Xids."""

    counts: dict[int, int]
    events: dict[tuple[int, float], int]
    processes: tuple[int, ...] = ()
    raw: tuple[object, object] = ((), ())
    """The sample's own ``xid_counts`` and ``xid_events``: the same again is nothing new."""


@mutable(slots=True)
class HealthState:
    """What the writer has learnt of each card; copied before a batch, so that a batch
    that fails is written again from the state before it."""

    seen: dict[Key, _Seen] = field(default_factory=dict)
    counters: dict[Key, tuple[int | None, ...]] = field(default_factory=dict)

    def copy(self) -> HealthState:
        return HealthState(
            {
                key: _Seen(dict(s.counts), dict(s.events), s.processes, s.raw)
                for key, s in self.seen.items()
            },
            dict(self.counters),
        )


def counter_values(health: GpuHealth) -> tuple[int | None, ...]:
    """The counters of ``health`` in HEALTH_COLUMNS' order (flags as 0 or 1)."""
    ecc, pages, rows = health.ecc, health.retired_pages, health.remapped_rows
    return (
        *(ecc.values() if ecc is not None else (None,) * 4),
        *(
            (pages.single_bit, pages.double_bit, _flag(pages.pending))
            if pages is not None
            else (None,) * 3
        ),
        *(
            (rows.correctable, rows.uncorrectable, int(rows.pending), int(rows.failed))
            if rows is not None
            else (None,) * 4
        ),
        health.pcie_replays,
        health.nvlink_crc_errors,
    )


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def arrivals(
    seen: _Seen | None, health: GpuHealth, now: float, watermark: float | None
) -> list[tuple[int, float, int]]:
    """(Xid, time, how many) that arrived since ``seen``; with no ``seen`` (the card's
    first sample in this run), the events held, less those at or before ``watermark``."""
    found: list[tuple[int, float, int]] = []
    for event in health.xid_events or ():
        before = seen.events.get((event.xid, event.time), 0) if seen is not None else 0
        new = event.count - before
        if new <= 0:
            continue
        if seen is None and watermark is not None and event.time <= watermark:
            continue
        found.append((event.xid, event.time if before == 0 else max(event.time, now), new))
    if seen is None:
        return found
    # the counts are exact: what the events say is trimmed to them, what they no longer
    # hold (more than 32 runs since the previous sample) is placed at this sample
    exact = {xid: count - seen.counts.get(xid, 0) for xid, count in health.xid_counts}
    kept: list[tuple[int, float, int]] = []
    for xid, when, new in found:
        room = exact.get(xid, 0)
        if room > 0:
            taken = min(room, new)
            kept.append((xid, when, taken))
            exact[xid] = room - taken
    kept += [(xid, now, left) for xid, left in sorted(exact.items()) if left > 0]
    return kept


class HealthRows:
    """Writes the Xids and counters of each sample's cards, inside the writer's batch."""

    def __init__(
        self,
        db: Callable[[], sqlite3.Connection],
        string_id: Callable[[str | None], int | None],
    ) -> None:
        self._db = db
        self._string_id = string_id
        self.state = HealthState()
        self._committed = HealthState()
        self._rows: dict[tuple[Key, int, int], int] = {}
        """(card, Xid, minute) -> the row's id, for the rows written in this run."""

    def committed(self) -> None:
        """The batch was written: its state is the one to start again from."""
        self._committed = self.state.copy()
        if len(self._rows) > MAX_CACHED_ROWS:  # a recorder runs for months
            self._rows.clear()

    def rolled_back(self) -> None:
        """The batch was not written: forget what it taught."""
        self.state = self._committed.copy()
        self._rows.clear()

    def add(self, gpu: GpuSample, now: float, process_ids: tuple[int, ...]) -> None:
        """Record ``gpu``'s Xids since its previous sample, and its counters if they changed.
        ``process_ids``: the store's rows of the processes on it (a lost card: none, and
        those of its last sample are taken)."""
        health = gpu.health
        if health is None:
            return
        key: Key = (gpu.physical_index, self._string_id(gpu.uuid))
        seen = self.state.seen.get(key)
        if not process_ids and seen is not None and gpu.lost:
            process_ids = seen.processes
        raw = (health.xid_counts, health.xid_events)
        if seen is not None and seen.raw == raw:  # no Xid since: the usual sample
            seen.processes = process_ids
        else:
            watermark = self._watermark(key) if seen is None else None
            for xid, when, count in arrivals(seen, health, now, watermark):
                self._add_xid(key, xid, when, count, process_ids)
            self.state.seen[key] = _Seen(
                dict(health.xid_counts),
                {(event.xid, event.time): event.count for event in health.xid_events or ()},
                process_ids,
                raw,
            )
        self._add_counters(key, health, now)

    def _watermark(self, key: Key) -> float | None:
        row = (
            self._db()
            .execute(
                "SELECT MAX(last_t) FROM xid_events WHERE physical_index = ? AND uuid_id IS ? "
                # a time set by hand (text, infinite) marks nothing as recorded
                "AND typeof(last_t) IN ('integer', 'real') AND last_t BETWEEN 0 AND ?",
                (*key, LATEST_TIME_S),
            )
            .fetchone()
        )
        return None if row is None or row[0] is None else float(row[0])

    def _add_xid(
        self, key: Key, xid: int, when: float, count: int, process_ids: tuple[int, ...]
    ) -> None:
        minute = math.floor(when / MINUTE)
        db = self._db()
        row_id = self._rows.get((key, xid, minute))
        if row_id is None:
            found = db.execute(
                "SELECT id FROM xid_events WHERE physical_index = ? AND uuid_id IS ? "
                "AND xid = ? AND minute = ?",
                (*key, xid, minute),
            ).fetchone()
            if found is not None:
                row_id = int(found[0])
        if row_id is None:
            cursor = db.execute(
                "INSERT INTO xid_events (physical_index, uuid_id, xid, minute, first_t, "
                "last_t, count) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (*key, xid, minute, when, when, count),
            )
            row_id = int(cursor.lastrowid or 0)
        else:
            db.execute(
                "UPDATE xid_events SET count = count + ?, first_t = MIN(first_t, ?), "
                "last_t = MAX(last_t, ?) WHERE id = ?",
                (count, when, when, row_id),
            )
        self._rows[(key, xid, minute)] = row_id
        db.executemany(
            "INSERT OR IGNORE INTO xid_processes (event_id, process_id) VALUES (?, ?)",
            [(row_id, process_id) for process_id in process_ids],
        )

    def _add_counters(self, key: Key, health: GpuHealth, now: float) -> None:
        values = counter_values(health)
        if all(value is None for value in values):
            return
        last = self.state.counters.get(key)
        if last is None:
            row = (
                self._db()
                .execute(
                    f"SELECT {', '.join(HEALTH_COLUMNS)} FROM health_counters "
                    "WHERE physical_index = ? AND uuid_id IS ? ORDER BY t DESC LIMIT 1",
                    key,
                )
                .fetchone()
            )
            last = tuple(row) if row is not None else None
        if last != values:
            marks = ", ".join("?" * (3 + len(values)))
            self._db().execute(
                f"INSERT INTO health_counters (t, physical_index, uuid_id, "
                f"{', '.join(HEALTH_COLUMNS)}) VALUES ({marks})",
                (now, *key, *values),
            )
        self.state.counters[key] = values
