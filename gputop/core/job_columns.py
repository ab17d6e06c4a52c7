"""A job's columns, defined once for ``gputop jobs``, the dashboard's jobs panel and the lab's.

Each column has its title (a shorter one in the panels, which share the screen with the
cards), its side in ``gputop jobs`` and the text of a job. ``gputop jobs`` writes times to
the second; the panels one unit shorter, so that a steady dashboard repaints nothing
(docs/units.md). A host's job (``HostJob``, decoded in gputop/core/remote/host_jobs.py)
answers the same questions as a local ``Job``, so one definition reads both.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gputop.core.jobs.model import Job
from gputop.core.jobs.usage import JobUsage, activity_cell
from gputop.core.records import frozen
from gputop.core.units import duration, duration_coarse, human_bytes


@frozen(slots=False)
class HostJob:
    """One job of one host, as its agent described it."""

    host: int
    """The host's position in the lab."""
    host_name: str
    id: int
    name: str = ""
    status: str = "?"
    status_text: str = "?"
    physical_indices: tuple[int, ...] = ()
    """Its cards' indices on its host (never another host's cards)."""
    pid: int | None = None
    command_text: str = ""
    created_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    usage: JobUsage | None = None
    """What it used, as its host measured it: range-checked where it entered."""
    local: bool = False
    """A job of this machine (the lab's ``local``): acted on without ssh."""
    uuids: tuple[str, ...] = ()
    """Its cards' UUIDs, as its host recorded them (none from an older agent)."""

    @property
    def ssh_host(self) -> str | None:
        """Where ``gputop jobs`` runs for it: the host over ssh, or None for this machine."""
        return None if self.local else self.host_name

    @property
    def active(self) -> bool:
        return self.status in ("waiting", "running")

    @property
    def gpus_text(self) -> str:
        return ",".join(str(i) for i in self.physical_indices) or "-"

    def duration_s(self, now: float | None = None) -> float | None:
        if self.started_at is None:
            return None
        end = self.ended_at if self.ended_at is not None else now
        return None if end is None else max(0.0, end - self.started_at)


ShownJob = Job | HostJob
"""What the columns read: a job of this machine, or of a host (decoded in remote/host_jobs.py)."""


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


@frozen(slots=False)
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


def texts(job: ShownJob, now: float, exact: bool) -> list[str]:
    """A job's text in each of ``COLUMNS``."""
    return [column.text(job, now, exact) for column in COLUMNS]
