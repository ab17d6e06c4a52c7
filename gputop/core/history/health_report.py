"""``gputop report --health``: a window's Xids and the cards whose health counters rose.

Read from the store's Xid and health counter tables (health_rows.py). A storm of one card
and code is shown as one event with its whole count; a counter's rise is from its last value
at or before the window's start (else its first in it) to its last in it. A row whose time,
card or Xid fails a range check is left out and counted (``skipped_rows``); a counter that
fails one is not known, that counter alone (``unknown_counters``). See docs/health.md.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import field

from gputop.core.history.report import COMMAND_READ, iso_text
from gputop.core.history.report import _private_to_reader as private_to_reader
from gputop.core.history.schema import HEALTH_COLUMNS
from gputop.core.numbers import LATEST_TIME_S, MAX_PID, whole_within, within
from gputop.core.records import frozen, mutable
from gputop.core.redact import kept_text
from gputop.core.xid import describe

MAX_XID = 2**31 - 1
MAX_COUNT = 2**62


@frozen
class XidProcess:
    pid: int
    user: str | None
    command: str | None
    job: str | None


@mutable(slots=True)
class XidRecord:
    gpu: int
    uuid: str | None
    xid: int
    time: float
    last_time: float
    count: int
    last_minute: int
    processes: dict[int, XidProcess] = field(default_factory=dict)


@frozen
class CounterRise:
    gpu: int
    uuid: str | None
    first_time: float
    last_time: float
    first: dict[str, int | None]
    last: dict[str, int | None]
    rise: dict[str, int]


@frozen
class HealthReport:
    since: float
    until: float
    events: list[XidRecord]
    counters: list[CounterRise]
    skipped_rows: int = 0
    unknown_counters: int = 0
    """Counter values out of range, each read as not known (the row's others kept)."""


def build_health_report(connection: sqlite3.Connection, since: float, until: float) -> HealthReport:
    skipped = [0, 0]
    events = _events(connection, since, until, skipped)
    counters = _counters(connection, since, until, skipped)
    return HealthReport(since, until, events, counters, skipped[0], skipped[1])


def _time_ok(value: object) -> bool:
    return within(value, 0, LATEST_TIME_S)


def _events(
    connection: sqlite3.Connection, since: float, until: float, skipped: list[int]
) -> list[XidRecord]:
    rows = connection.execute(
        "SELECT e.id, e.physical_index, uuids.text, e.xid, e.minute, e.first_t, e.last_t, "
        "e.count FROM xid_events e LEFT JOIN strings uuids ON uuids.id = e.uuid_id "
        "WHERE e.last_t >= ? AND e.first_t < ? ORDER BY e.physical_index, e.uuid_id, e.xid, "
        "e.minute",
        (since, until),
    ).fetchall()
    redact = not private_to_reader(connection)
    merged: list[XidRecord] = []
    for row_id, gpu, uuid, xid, minute, first_t, last_t, count in rows:
        if not (
            within(gpu, 0, 4096)
            and within(xid, 0, MAX_XID)
            and within(count, 1, MAX_COUNT)
            and _time_ok(first_t)
            and _time_ok(last_t)
            and within(minute, 0, LATEST_TIME_S)
            and (uuid is None or isinstance(uuid, str))
        ):
            skipped[0] += 1
            continue
        last = merged[-1] if merged else None
        if (
            last is not None
            and (last.gpu, last.uuid, last.xid) == (gpu, uuid, xid)
            and int(minute) - last.last_minute <= 1
        ):
            last.count += int(count)
            last.time = min(last.time, float(first_t))
            last.last_time = max(last.last_time, float(last_t))
            last.last_minute = int(minute)
            record = last
        else:
            record = XidRecord(
                int(gpu), uuid, int(xid), float(first_t), float(last_t), int(count), int(minute)
            )
            merged.append(record)
        for pid, user, command, job in connection.execute(
            f"SELECT r.pid, users.text, {COMMAND_READ}, r.job FROM xid_processes x "
            "JOIN processes r ON r.id = x.process_id "
            "LEFT JOIN strings users ON users.id = r.user_id "
            "LEFT JOIN strings commands ON commands.id = r.command_id "
            "WHERE x.event_id = ? ORDER BY r.pid",
            (row_id,),
        ):
            if not within(pid, 0, MAX_PID):
                skipped[0] += 1
                continue
            record.processes[int(pid)] = XidProcess(
                int(pid),
                user if isinstance(user, str) else None,
                kept_text(command, "redacted" if redact else None),
                job if isinstance(job, str) else None,
            )
    merged.sort(key=lambda record: (record.time, record.gpu, record.xid))
    return merged


def _counters(
    connection: sqlite3.Connection, since: float, until: float, skipped: list[int]
) -> list[CounterRise]:
    columns = ", ".join(f"c.{column}" for column in HEALTH_COLUMNS)
    select = (
        f"SELECT c.t, c.physical_index, uuids.text, {columns} FROM health_counters c "
        "LEFT JOIN strings uuids ON uuids.id = c.uuid_id "
    )
    cards = connection.execute(
        "SELECT DISTINCT physical_index, uuid_id FROM health_counters WHERE t < ?", (until,)
    ).fetchall()
    found: list[CounterRise] = []
    for gpu, uuid_id in cards:
        key = "WHERE c.physical_index = ? AND c.uuid_id IS ? "
        first = (
            connection.execute(
                select + key + "AND c.t <= ? ORDER BY c.t DESC LIMIT 1", (gpu, uuid_id, since)
            ).fetchone()
            or connection.execute(
                select + key + "AND c.t > ? AND c.t < ? ORDER BY c.t LIMIT 1",
                (gpu, uuid_id, since, until),
            ).fetchone()
        )
        last = connection.execute(
            select + key + "AND c.t < ? ORDER BY c.t DESC LIMIT 1", (gpu, uuid_id, until)
        ).fetchone()
        if first is None or last is None:
            continue
        opened = _checked_counters(first, skipped)
        closed = opened if last == first else _checked_counters(last, skipped)
        if opened is None or closed is None:
            skipped[0] += 1
            continue
        (first_t, card, uuid, before), (last_t, _card, _uuid, after) = opened, closed
        rise: dict[str, int] = {}
        for name, old in before.items():
            new = after[name]
            if old is not None and new is not None and new > old:
                rise[name] = new - old
        if rise:
            found.append(CounterRise(card, uuid, first_t, last_t, before, after, rise))
    found.sort(key=lambda rise: rise.gpu)
    return found


def _checked_counters(
    row: tuple[object, ...], skipped: list[int]
) -> tuple[float, int, str | None, dict[str, int | None]] | None:
    """The row's time, card, UUID and counters; ``None`` where its time, card or UUID is
    not one. A counter out of range is ``None`` (not known), counted in ``skipped[1]``: one
    counter changed by hand no longer hides the card's other counters' rise."""
    t, gpu, uuid, *values = row
    if not (
        isinstance(t, (int, float))
        and _time_ok(t)
        and whole_within(gpu, 0, 4096)
        and (uuid is None or isinstance(uuid, str))
    ):
        return None
    counters: dict[str, int | None] = {}
    for name, value in zip(HEALTH_COLUMNS, values, strict=True):
        if value is not None and not whole_within(value, 0, MAX_COUNT):
            skipped[1] += 1
            value = None
        counters[name] = value
    return float(t), gpu, uuid, counters


def health_report_to_json(report: HealthReport) -> dict[str, object]:
    """``gputop report --health --json`` (docs/health.md): times in epoch seconds, the
    window also as ISO text as ``report --json`` gives it."""
    return {
        "schema": 1,
        "since": iso_text(report.since),
        "until": iso_text(report.until),
        "events": [
            {
                "gpu": event.gpu,
                "uuid": event.uuid,
                "xid": event.xid,
                "time": event.time,
                "last_time": event.last_time,
                "count": event.count,
                "meaning": describe(event.xid).meaning,
                "action": describe(event.xid).action,
                "processes": [dataclasses.asdict(p) for p in event.processes.values()],
            }
            for event in report.events
        ],
        "counters": [dataclasses.asdict(rise) for rise in report.counters],
        "skipped_rows": report.skipped_rows,
        "unknown_counters": report.unknown_counters,
    }
