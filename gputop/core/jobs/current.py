"""The jobs as they are now: what the store's readers are shown.

Two things are truer than a row: what a supervisor kept in its reserved file (unrecorded.py),
and that an active job whose supervisor is gone is lost. Both are recorded where the store
can be written, else applied to what is returned, so reading never needs writing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol

from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.store_rows import Transition, lost
from gputop.core.jobs.unrecorded import Unrecorded, forget_unrecorded, read_unrecorded
from gputop.core.private_files import StoreError
from gputop.core.process_control import from_earlier_boot, process_alive

NEVER_STARTED_AFTER_S = 120.0
"""A job whose supervisor has not reported by then is taken as lost."""


class RowStore(Protocol):
    """What this module needs of the job store (store.py imports this module, not back)."""

    in_memory: bool
    state_dir: Path

    @property
    def host(self) -> str: ...

    def reread(self, job_id: int) -> Job: ...

    def record(self, job_id: int, transition: Transition) -> bool: ...


def current_jobs(store: RowStore, jobs: list[Job]) -> list[Job]:
    """``jobs`` (rows just read from ``store``) as they are now."""
    files = {} if store.in_memory else read_unrecorded(store.state_dir)
    now = time.time()
    return [_lost_if_gone(store, _unrecorded(store, job, files.get(job.id)), now) for job in jobs]


def record_unrecorded(store: RowStore, unrecorded: Unrecorded) -> None:
    """Make the writes the file holds, in order: each with the same result however often
    made (a reader and the supervisor may both)."""
    for transition in unrecorded.transitions():
        store.record(unrecorded.job_id, transition)


def _unrecorded(store: RowStore, job: Job, unrecorded: Unrecorded | None) -> Job:
    """``job`` with what its file holds, recorded where the store takes it."""
    if unrecorded is None:
        return job
    if job.state is JobState.ENDED:  # recorded already (the file is left over)
        forget_unrecorded(store.state_dir, job.id)
        return job
    seen = unrecorded.applied(job)
    if unrecorded.end is None and (seen.host != store.host or _supervisor_alive(seen)):
        return seen  # its supervisor records it (another host's: this reader cannot tell)
    try:
        record_unrecorded(store, unrecorded)
    except StoreError as error:
        if error.fault is None:
            raise
        return seen
    forget_unrecorded(store.state_dir, job.id)
    return store.reread(job.id)


def _supervisor_alive(job: Job) -> bool:
    """The job's recorded supervisor still runs (started in this boot)."""
    if job.supervisor_pid is None or _from_earlier_boot(job):
        return False
    return process_alive(
        job.supervisor_pid, job.supervisor_start_time, job.supervisor_start_ticks, job.boot_id
    )


def _from_earlier_boot(job: Job) -> bool:
    return from_earlier_boot(job.boot_id, job.supervisor_start_time or job.created_at)


def _lost_note(job: Job, now: float) -> str | None:
    """Why an active job of this host is lost, or ``None`` where it is not."""
    if _from_earlier_boot(job):
        return (
            "the machine restarted since it was launched: none of its processes is "
            "running, and gputop will never signal its old pids"
        )
    if job.supervisor_pid is None:
        return (
            None if now - job.created_at < NEVER_STARTED_AFTER_S else "its supervisor never started"
        )
    if _supervisor_alive(job):
        return None
    note = (
        f"its supervisor (pid {job.supervisor_pid}) ended without recording how the "
        "job ended (killed, or the machine restarted)"
    )
    if job.pid is not None and process_alive(
        job.pid, job.pid_start_time, job.pid_start_ticks, job.boot_id
    ):
        # said as of then: the note stays while the process may end at any time
        note += (
            f"; the job (pid {job.pid}) was still running when this was found "
            f"(gputop jobs stop {job.id} ends it)"
        )
    return note


def _lost_if_gone(store: RowStore, job: Job, now: float) -> Job:
    """``job``, marked lost where it is active on this host and its supervisor is gone."""
    if not job.is_active or job.host != store.host or job.slurm_job_id is not None:
        return job  # Slurm's jobs have no supervisor: gputop.core.slurm.sync follows them
    note = _lost_note(job, now)
    if note is None:
        return job
    transition = lost(note, job.supervisor_pid, now)
    try:
        marked = store.record(job.id, transition)
    except StoreError as error:
        if error.fault is None:
            raise
        return transition.applied(job)
    return store.reread(job.id) if marked else job
