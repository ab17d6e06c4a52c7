"""The jobs as they are now, from their rows: what the store's readers are shown.

Two things can be truer than a row. A job's end kept beside the store (pending_end.py: its
supervisor could not write it, the disk was full) is the job's end. An active job whose
supervisor is gone is lost. Both are recorded in the store when it can be written, and
otherwise applied to what is returned only, so that reading never needs writing
(docs/faults.md).

The store hands itself in as a ``RowStore`` (what this module needs of it), so that the
store imports this module and not the other way round (docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Protocol

from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.pending_end import ended_as_kept, forget_pending_end, read_pending_ends
from gputop.core.jobs.usage import JobUsage
from gputop.core.private_files import StoreError
from gputop.core.process_control import from_earlier_boot, process_alive

NEVER_STARTED_AFTER_S = 120.0
"""A job whose supervisor has not reported by then is taken as lost."""


class RowStore(Protocol):
    """What reading jobs as they are now needs of the job store (store.py's ``JobStore``)."""

    in_memory: bool
    state_dir: Path

    @property
    def host(self) -> str: ...

    def reread(self, job_id: int) -> Job: ...

    def mark_ended(
        self,
        job_id: int,
        *,
        exit_code: int | None = None,
        signal: int | None = None,
        note: str | None = None,
        stopped: bool | None = None,
        ended_at: float | None = None,
        usage: JobUsage | None = None,
    ) -> None: ...

    def mark_lost(self, job_id: int, note: str, supervisor_pid: int | None) -> bool: ...


def current_jobs(store: RowStore, jobs: list[Job]) -> list[Job]:
    """``jobs`` (rows just read from ``store``) as they are now."""
    return _refresh_liveness(store, _with_pending_ends(store, jobs))


def _with_pending_ends(store: RowStore, jobs: list[Job]) -> list[Job]:
    if store.in_memory:
        return jobs
    pending = read_pending_ends(store.state_dir)
    if not pending:
        return jobs
    result = []
    for job in jobs:
        end = pending.get(job.id)
        if end is None:
            result.append(job)
            continue
        if job.state is not JobState.ENDED:
            try:
                store.mark_ended(
                    end.job_id,
                    exit_code=end.exit_code,
                    signal=end.signal,
                    note=end.note,
                    stopped=end.stopped or None,
                    ended_at=end.ended_at,
                    usage=end.usage,
                )
            except StoreError as error:
                if error.fault is None:
                    raise
                result.append(ended_as_kept(job, end))
                continue
            job = store.reread(job.id)
        forget_pending_end(store.state_dir, job.id)
        result.append(job)
    return result


def _refresh_liveness(store: RowStore, jobs: list[Job]) -> list[Job]:
    """Mark lost the active jobs of this host whose supervisor is gone: in the store, or
    (where it cannot be written) in the list returned."""
    result = []
    now = time.time()
    for job in jobs:
        result.append(job)
        if not job.is_active or job.host != store.host or job.slurm_job_id is not None:
            continue  # Slurm's jobs have no supervisor: gputop.core.slurm.sync follows them
        if from_earlier_boot(job.boot_id, job.supervisor_start_time or job.created_at):
            note = (
                "the machine restarted since it was launched: none of its processes is "
                "running, and gputop will never signal its old pids"
            )
        elif job.supervisor_pid is None:
            if now - job.created_at < NEVER_STARTED_AFTER_S:
                continue
            note = "its supervisor never started"
        elif process_alive(job.supervisor_pid, job.supervisor_start_time):
            continue
        else:
            note = (
                f"its supervisor (pid {job.supervisor_pid}) ended without recording how the "
                "job ended (killed, or the machine restarted)"
            )
            if job.pid is not None and process_alive(job.pid, job.pid_start_time):
                note += f"; the job (pid {job.pid}) is still running"
        try:
            marked = store.mark_lost(job.id, note, job.supervisor_pid)
        except StoreError as error:
            if error.fault is None:
                raise
            result[-1] = dataclasses.replace(job, state=JobState.LOST, note=note)
            continue
        if marked:
            result[-1] = store.reread(job.id)
    return result
