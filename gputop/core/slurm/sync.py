"""Keep the job store's Slurm jobs in step with what Slurm reports (docs/slurm.md).

A job submitted through ``sbatch`` has no gputop supervisor: Slurm runs it. Whoever lists
jobs (``gputop jobs``, the dashboard) asks ``squeue`` once for all of them and copies the
state, the pending reason, the cards Slurm gave it and how it ended into the store.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.store import JobStore
from gputop.core.safe_text import clean
from gputop.core.slurm.commands import SlurmError
from gputop.core.slurm.queue import SlurmJob, read_queue

_WAITING = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "RESV_DEL_HOLD"})
_RUNNING = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING"})


def slurm_state(slurm: SlurmJob) -> JobState:
    if slurm.state in _WAITING:
        return JobState.WAITING
    if slurm.state in _RUNNING:
        return JobState.RUNNING
    return JobState.ENDED


def sync_slurm_jobs(store: JobStore, environ: Mapping[str, str] | None = None) -> str | None:
    """Update every active Slurm job of the store; Slurm's message when it cannot be asked."""
    followed = [job for job in store.list_jobs() if job.is_active and job.slurm_job_id]
    if not followed:
        return None
    try:
        reported = {
            slurm.job_id: slurm
            for slurm in read_queue(environ, job_ids=[job.slurm_job_id or 0 for job in followed])
        }
    except SlurmError as error:
        return str(error)
    for job in followed:
        _apply(store, job, reported.get(job.slurm_job_id or 0))
    return None


def _apply(store: JobStore, job: Job, slurm: SlurmJob | None) -> None:
    if slurm is None:
        store.update_slurm_job(
            job.id,
            state=JobState.ENDED,
            note=f"Slurm job {job.slurm_job_id} is no longer in Slurm's queue",
            physical_indices=job.physical_indices,
            started_at=None,
        )
        return
    state = slurm_state(slurm)
    note = clean(slurm.status_text)
    if state is JobState.RUNNING and slurm.nodes:
        note += f" on {clean(slurm.nodes)}"
    started = slurm.start_time if state is not JobState.WAITING else None
    if started is not None and started > time.time() + 60:
        started = None  # a pending job's start_time is Slurm's estimate, not a start
    store.update_slurm_job(
        job.id,
        state=state,
        note=note,
        physical_indices=slurm.gpu_indices or job.physical_indices,
        started_at=started,
        exit_code=slurm.exit_code if state is JobState.ENDED else None,
        signal=slurm.signal if state is JobState.ENDED else None,
    )
