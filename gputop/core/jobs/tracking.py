"""What the dashboard shows of gputop's jobs, read off the UI thread once per refresh.

A job runs as the leader of its own session (the supervisor starts it with ``setsid``), so
every process it forks, on any GPU, shares its session id: that is how a GPU process is
recognised as a job's, even a DataLoader worker or a ``torchrun`` child the job started.
Log tails are re-read only when a log grew, so a long job list costs a ``stat`` per job.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gputop.core.jobs.logs import last_line
from gputop.core.jobs.model import Job, JobState
from gputop.core.model import ProcessOrigin, Snapshot


@dataclass(frozen=True)
class JobsView:
    """Jobs, oldest first, with the last line of each log and which GPU processes are theirs."""

    jobs: tuple[Job, ...] = ()
    last_lines: Mapping[int, str] = field(default_factory=dict)
    job_of_pid: Mapping[int, int] = field(default_factory=dict)
    """GPU process pid -> id of the running job it belongs to."""
    read_number: int = 0
    """Reads are numbered as they start: a view with a lower number is older, however late
    it arrives (a sampling thread and a worker read at once)."""

    @property
    def active(self) -> tuple[Job, ...]:
        return tuple(job for job in self.jobs if job.is_active)


class LogTails:
    """Last log lines, re-read only for logs that changed size since the last look."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, str]] = {}

    def last_lines(self, jobs: Iterable[Job]) -> dict[int, str]:
        lines: dict[int, str] = {}
        for job in jobs:
            try:
                size = os.stat(job.log_path).st_size
            except OSError:
                lines[job.id] = ""
                continue
            seen = self._seen.get(job.log_path)
            if seen is None or seen[0] != size:
                seen = (size, last_line(job.log_path) or "")
                self._seen[job.log_path] = seen
            lines[job.id] = seen[1]
        return lines


def job_processes(snapshot: Snapshot, jobs: Sequence[Job]) -> dict[int, int]:
    """Which GPU processes of this machine belong to a running job: pid -> job id."""
    here = socket.gethostname()
    sessions = {
        job.pid: job.id
        for job in jobs
        if job.state is JobState.RUNNING and job.pid and job.host in ("", here)
    }
    if not sessions:
        return {}
    found: dict[int, int] = {}
    for gpu in snapshot.gpus:
        for process in gpu.processes:
            if process.origin is not ProcessOrigin.HOST or process.pid in found:
                continue
            job_id = sessions.get(process.pid)
            if job_id is None:
                try:
                    job_id = sessions.get(os.getsid(process.pid))
                except OSError:  # ended since the sample, or not ours to ask about
                    continue
            if job_id is not None:
                found[process.pid] = job_id
    return found


def read_jobs_view(
    jobs: Sequence[Job], snapshot: Snapshot | None, tails: LogTails, read_number: int = 0
) -> JobsView:
    """Everything the jobs panel and the process table need, in one immutable value."""
    return JobsView(
        read_number=read_number,
        jobs=tuple(jobs),
        last_lines=tails.last_lines(jobs),
        job_of_pid=job_processes(snapshot, jobs) if snapshot is not None else {},
    )


def job_memory_peaks(
    peaks: Mapping[int, int], snapshot: Snapshot | None, jobs: JobsView
) -> dict[int, int]:
    """The most GPU memory each running job's processes held together, updated with one
    more snapshot; jobs no longer in the view are forgotten."""
    known = {job.id for job in jobs.jobs}
    updated = {job_id: most for job_id, most in peaks.items() if job_id in known}
    if snapshot is None:
        return updated
    now: dict[int, int] = {}
    for gpu in snapshot.gpus:
        for process in gpu.processes:
            job_id = jobs.job_of_pid.get(process.pid)
            if job_id is not None and process.used_memory_bytes is not None:
                now[job_id] = now.get(job_id, 0) + process.used_memory_bytes
    for job_id, held in now.items():
        updated[job_id] = max(updated.get(job_id, 0), held)
    return updated
