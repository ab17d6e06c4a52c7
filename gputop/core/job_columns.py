"""A job's columns, defined once for ``gputop jobs``, the dashboard's jobs panel and the lab's.

Each column has its title (a shorter one in the panels, which share the screen with the
cards), its side in ``gputop jobs`` and the text of a job. ``gputop jobs`` writes times to
the second; the panels one unit shorter, so that a steady dashboard repaints nothing
(docs/units.md). A local ``Job`` and a host's (``HostJob``: gputop/core/remote/host_jobs.py)
answer the same questions, so one definition reads both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from gputop.core.jobs.usage import JobUsage, activity_cell
from gputop.core.units import duration, duration_coarse, human_bytes


class ShownJob(Protocol):
    """What a job's columns read, of a local job or of a host's."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def gpus_text(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def status_text(self) -> str: ...
    @property
    def started_at(self) -> float | None: ...
    @property
    def usage(self) -> JobUsage | None: ...
    def duration_s(self, now: float | None = None) -> float | None: ...


def elapsed(seconds: float | None, exact: bool) -> str:
    """A time taken: to the second (``gputop jobs``), else one unit shorter; a dash for none."""
    if seconds is None:
        return "-"
    return duration(seconds) if exact else duration_coarse(seconds, seconds_below_minute=True)


def clock(when: float | None, now: float, exact: bool) -> str:
    """When it started: the clock time today, else the date (the panels: within 20 hours)."""
    if when is None:
        return "-"
    local = time.localtime(when)
    if exact:
        today = time.strftime("%Y-%m-%d", local) == time.strftime("%Y-%m-%d", time.localtime(now))
        return time.strftime("%H:%M:%S" if today else "%Y-%m-%d %H:%M", local)
    return time.strftime("%H:%M:%S" if now - when < 20 * 3600 else "%b %d %H:%M", local)


def _peak(usage: JobUsage | None) -> str:
    peak = None if usage is None else usage.peak_memory_bytes
    return "-" if peak is None else human_bytes(peak)


@dataclass(frozen=True)
class JobColumn:
    title: str
    """Its heading in ``gputop jobs``."""
    short: str
    """Its heading in the panels."""
    text: Callable[[ShownJob, float, bool], str]
    """A job's text in it at ``now``, exact (``gputop jobs``) or not (the panels)."""
    right: bool = False
    """Right-aligned in ``gputop jobs`` (a number)."""


ID = JobColumn("ID", "ID", lambda job, now, exact: str(job.id), right=True)
NAME = JobColumn("NAME", "NAME", lambda job, now, exact: job.name)
GPUS = JobColumn("GPUS", "GPUS", lambda job, now, exact: job.gpus_text)
STATUS = JobColumn("STATUS", "STATUS", lambda job, now, exact: job.status_text)
STARTED = JobColumn("STARTED", "STARTED", lambda job, now, exact: clock(job.started_at, now, exact))
DURATION = JobColumn(
    "DURATION", "DURATION", lambda job, now, exact: elapsed(job.duration_s(now), exact)
)
# What it used (docs/history.md, docs/activity.md): GPU time summed over its cards, peak memory
# on all at once, its cards' SM active; a dash where nothing was measured.
GPU_TIME = JobColumn(
    "GPU TIME",
    "GPU TIME",
    lambda job, now, exact: "-" if job.usage is None else elapsed(job.usage.gpu_seconds, exact),
)
PEAK = JobColumn("PEAK MEM", "PEAK", lambda job, now, exact: _peak(job.usage))
SM_ACTIVE = JobColumn("SM ACTIVE", "SM ACT", lambda job, now, exact: activity_cell(job.usage))
LAST_LINE = ("LAST LINE", "LAST LOG LINE")
"""The last column's headings: each view writes its own text there (why a job waits, or the
last line of its log)."""

COLUMNS = (ID, NAME, GPUS, STATUS, STARTED, DURATION, GPU_TIME, PEAK, SM_ACTIVE)
"""The columns of a job on this machine, before its last line."""
USAGE = (GPU_TIME, PEAK, SM_ACTIVE)


def texts(
    job: ShownJob, now: float, exact: bool, columns: Sequence[JobColumn] = COLUMNS
) -> list[str]:
    """A job's text in each of ``columns``."""
    return [column.text(job, now, exact) for column in columns]
