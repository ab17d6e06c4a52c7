"""The dashboard's jobs: one owner of the job store, the log tails and what was last read.

The dashboard reads its jobs from two threads (the sampler, once per refresh, and a worker
right after a launch or a stop). SQLite connections stay in the thread that opened them, so
each thread opens its own store through this service; the log tails are shared, so they sit
behind one lock. Problems a person must know about (the store moved aside, unreadable) go
to the ``report`` callback the user interface gives, as toolong's watcher hands its news to
the widget that owns it. Nothing here imports Textual.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from gputop.core.errors import GputopError
from gputop.core.jobs.launch import LaunchRequest, launch_job
from gputop.core.jobs.model import Job
from gputop.core.jobs.stop import SlurmCanceller, stop_job
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.tracking import JobsView, LogTails, read_jobs_view
from gputop.core.model import Snapshot

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
        """Whose cards count as taken by "you" when a launch is checked."""
        self.cwd = cwd
        """Where a launch runs by default: where gputop was started."""
        self._job_environ = dict(job_environ) if job_environ is not None else None
        self._report = report
        self.cancel_in_slurm = cancel_in_slurm
        """How a job Slurm runs is stopped (``gputop.core.slurm.submit.cancel``)."""
        self._tails = LogTails()
        self._tails_lock = threading.Lock()
        self._read_numbers = itertools.count(1)
        self._problem: str | None = None
        self.view = JobsView()
        """The jobs last shown; replaced on the UI thread only."""

    def job_environ(self) -> dict[str, str]:
        """What launched jobs inherit; by default this process's own environment."""
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
                return read_jobs_view(jobs, snapshot, self._tails, number)
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
        """Commands launched before, oldest first; none when the store cannot be opened
        (no history is no reason to refuse a launch: the launch itself will say why)."""
        try:
            store = JobStore.open(self.state_dir)
        except GputopError:
            return ()
        try:
            return tuple(store.history())
        finally:
            store.close()

    def launch(self, request: LaunchRequest, snapshot: Snapshot, environ: Mapping[str, str]) -> Job:
        """Check and start a job (``launch_job``). Raises GputopError, or OSError when the
        supervisor cannot be started."""
        store = JobStore.open(self.state_dir, repair=True)
        try:
            return launch_job(store, request, snapshot, environ)
        finally:
            store.close()

    def stop(self, job_id: int) -> str:
        """Stop a job (``stop_job``); what happened, for a person. Raises GputopError."""
        store = JobStore.open(self.state_dir)
        try:
            return stop_job(store, job_id, cancel_in_slurm=self.cancel_in_slurm)
        finally:
            store.close()
