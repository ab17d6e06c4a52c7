"""The Xids each gputop job's cards had while it ran, from the history store where one is
readable (``settings.HISTORY_DB``, else the state directory's): ``None`` for "cannot know"
(no store, one too old or unreadable), never "none". docs/health.md."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable

from gputop.core.history.job_xids import recorded_job_xids
from gputop.core.history.store import HistoryError, default_history_path, open_for_reading
from gputop.core.jobs.model import Job
from gputop.core.jobs.xid_marks import JobXids


def recorded_xids(jobs: Iterable[Job], now: float) -> dict[int, JobXids | None]:
    """Job id -> its Xids; every job ``None`` where no store can be read."""
    jobs = list(jobs)
    unknown: dict[int, JobXids | None] = {job.id: None for job in jobs}
    path = default_history_path()
    if not jobs or not os.path.lexists(path):
        return unknown
    try:
        connection = open_for_reading(path)
    except HistoryError:
        return unknown  # the report says why; a jobs list shows no mark it cannot know
    try:
        return {job.id: recorded_job_xids(connection, job, now) for job in jobs}
    except sqlite3.Error:
        return unknown
    finally:
        connection.close()
