"""The dashboard's jobs: one owner of the job store, the log tails and what was last read.

Two threads read jobs (the sampler, a worker after a launch or stop): each opens the store
here (``JobStore.open`` shares one connection per process) and the log tails sit behind a lock.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gputop.core.errors import GputopError
from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.stop import SlurmCanceller, stop_job
from gputop.core.jobs.store import JobStore
from gputop.core.model import ProcessOrigin, Snapshot
from gputop.core.records import frozen

if TYPE_CHECKING:
    from gputop.core.jobs.launch import LaunchRequest


@frozen(slots=False)
class JobsView:
    """Jobs, oldest first, with the last line of each log and which GPU processes are theirs."""

    jobs: tuple[Job, ...] = ()
    last_lines: Mapping[int, str] = field(default_factory=dict)
    job_of_pid: Mapping[int, int] = field(default_factory=dict)
    """GPU process pid -> id of the running job it belongs to."""
    read_number: int = 0
    """Reads are numbered as they start: a lower number is older, however late it arrives."""

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
                from gputop.core.jobs.logs import last_line  # a job's log: not at start

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


def job_memory_peaks(
    peaks: Mapping[int, int], snapshot: Snapshot | None, jobs: JobsView
) -> dict[int, int]:
    """The most GPU memory each job's processes held together, with one more snapshot."""
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


DASHBOARD_CLAIM_ADVICE = (
    'Choose other cards, or tick "Wait until these cards are free" to start once the claim '
    "ends (gputop run --ignore-claims launches anyway, and marks the job so)."
)

Severity = Literal["information", "warning", "error"]
ReportProblem = Callable[[str, Severity], None]


class JobsService:
    """Where the dashboard's jobs live, and what launching one inherits."""

    def __init__(
        self,
        state_dir: Path | None,
        *,
        user: str,
        cwd: str,
        job_environ: Mapping[str, str] | None,
        report: ReportProblem,
        cancel_in_slurm: SlurmCanceller | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.user = user
        self.cwd = cwd
        """Where a launch runs by default: where gputop was started."""
        self._job_environ = dict(job_environ) if job_environ is not None else None
        self._report = report
        self.cancel_in_slurm = cancel_in_slurm
        self._tails = LogTails()
        self._tails_lock = threading.Lock()
        self._read_numbers = itertools.count(1)
        self._problem: str | None = None
        self.view = JobsView()
        """The jobs last shown; replaced on the UI thread only."""

    def job_environ(self) -> dict[str, str]:
        """What launched jobs inherit (default: this process's environment)."""
        return dict(os.environ if self._job_environ is None else self._job_environ)

    def open_store(self) -> JobStore | None:
        """A store for the calling thread (close it there), or None after reporting why."""
        try:
            store = JobStore.open(self.state_dir)
        except GputopError as error:
            self._unavailable(str(error))
            return None
        for notice in store.take_notices():
            self._report(notice, "warning")
        return store

    def _unavailable(self, why: str) -> None:
        """Said once, not at every refresh, until the jobs can be read again."""
        text = f"Jobs unavailable: {why}"
        if text != self._problem:
            self._problem = text
            self._report(text, "error")

    def read(self, store: JobStore | None, snapshot: Snapshot | None) -> JobsView | None:
        """The jobs with their last log lines and GPU processes; None when unreadable."""
        if store is None:
            return None
        number = next(self._read_numbers)  # before reading: a later read, a larger number
        try:
            jobs = store.list_jobs()
            for notice in store.take_notices():
                self._report(notice, "warning")
            self._problem = None
            with self._tails_lock:
                lines = self._tails.last_lines(jobs)
            pids = job_processes(snapshot, jobs) if snapshot is not None else {}
            return JobsView(tuple(jobs), lines, pids, number)
        except GputopError as error:
            self._unavailable(str(error))
            return None

    def read_now(self, snapshot: Snapshot | None) -> JobsView | None:
        """Read once through a store of its own (a worker, right after a launch or stop)."""
        store = self.open_store()
        try:
            return self.read(store, snapshot)
        finally:
            if store is not None:
                store.close()

    def history(self) -> tuple[str, ...]:
        """Commands launched before, oldest first; none where the store cannot be opened (the
        launch itself says why)."""
        try:
            store = JobStore.open(self.state_dir)
        except GputopError:
            return ()
        with store:
            return tuple(store.history())

    def launch(self, request: LaunchRequest, snapshot: Snapshot, environ: Mapping[str, str]) -> Job:
        """Check and start a job (``launch_job``); GputopError, or OSError. Cards another user
        claimed, or claims that cannot be told, are refused first, by ``gputop run``'s check,
        with nothing recorded; a launch that waits waits for the claim."""
        from gputop.core.claims.jobs import check_launch_claims  # not before the first frame
        from gputop.core.claims.view import read_claims

        check_launch_claims(
            read_claims(environ),
            snapshot,
            request.physical_indices,
            os.geteuid(),
            wait=request.wait,
            advice=DASHBOARD_CLAIM_ADVICE,
            unknown_advice="gputop run --ignore-claims launches anyway (the job is marked so).",
        )
        from gputop.core.jobs.launch import launch_job  # not before the first frame

        with JobStore.open(self.state_dir, repair=True) as store:
            return launch_job(store, request, snapshot, environ)

    def stop(self, job_id: int) -> str:
        """Stop a job (``stop_job``); what happened, for a person. Raises GputopError."""
        with JobStore.open(self.state_dir) as store:
            return stop_job(store, job_id, cancel_in_slurm=self.cancel_in_slurm)
