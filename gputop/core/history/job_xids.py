"""A gputop job's Xids from the history store: those recorded on its cards while it ran
(jobs/xid_marks.py says which cards and when; docs/health.md)."""

from __future__ import annotations

import sqlite3

from gputop.core.history.health_report import MAX_COUNT, MAX_XID
from gputop.core.history.store import HEALTH_FROM
from gputop.core.jobs.model import Job
from gputop.core.jobs.xid_marks import JobXids, is_job_card, job_window
from gputop.core.numbers import within


def recorded_job_xids(connection: sqlite3.Connection, job: Job, now: float) -> JobXids | None:
    """(Xid, count) recorded on ``job``'s cards while it ran; None from a store too old to
    keep Xids. A row whose numbers are out of range is left out."""
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    if int(version) < HEALTH_FROM:
        return None
    window = job_window(job, now)
    if window is None:
        return ()
    counts: dict[int, int] = {}
    for gpu, uuid, xid, count in connection.execute(
        "SELECT e.physical_index, uuids.text, e.xid, e.count FROM xid_events e "
        "LEFT JOIN strings uuids ON uuids.id = e.uuid_id "
        "WHERE e.last_t >= ? AND e.first_t <= ?",
        window,
    ):
        if not (within(gpu, 0, 4096) and within(xid, 0, MAX_XID) and within(count, 1, MAX_COUNT)):
            continue
        if is_job_card(job, int(gpu), uuid if isinstance(uuid, str) else None):
            counts[int(xid)] = counts.get(int(xid), 0) + int(count)
    return tuple(sorted(counts.items()))
