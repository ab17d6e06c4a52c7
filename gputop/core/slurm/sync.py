"""Keep the job store's Slurm jobs in step with what Slurm reports (docs/slurm.md).

A job submitted through ``sbatch`` has no gputop supervisor: Slurm runs it. Whoever lists
jobs (``gputop jobs``, the dashboard) asks ``squeue`` once for all of them and copies the
state, the pending reason, the cards Slurm gave it and how it ended into the store, with
what it used so far as its node's usage wrapper reported it (usage_file.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.usage import not_measured_text
from gputop.core.safe_text import clean
from gputop.core.slurm.commands import SlurmError
from gputop.core.slurm.job_rows import set_slurm_usage, update_slurm_job
from gputop.core.slurm.queue import SlurmJob, read_queue
from gputop.core.slurm.usage_file import NOT_DELIVERED, read_report, remove_report

_WAITING = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "RESV_DEL_HOLD"})
LATE_REPORT_S = 600.0
_RAN = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY"})
"""Ended states of a job that ran (a cancelled one may never have)."""
_RUNNING = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING"})


def slurm_state(slurm: SlurmJob) -> JobState:
    if slurm.state in _WAITING:
        return JobState.WAITING
    if slurm.state in _RUNNING:
        return JobState.RUNNING
    return JobState.ENDED


def sync_slurm_jobs(store: JobStore, environ: Mapping[str, str] | None = None) -> str | None:
    """Update every active Slurm job of the store; Slurm's message when it cannot be asked."""
    jobs = store.list_jobs()
    _late_reports(store, jobs)
    followed = [job for job in jobs if job.is_active and job.slurm_job_id]
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


def _late_reports(store: JobStore, jobs: list[Job]) -> None:
    """Take the reports that came after their job's end: a node's wrapper writes the last
    one as the command ends, which may be after Slurm says so (``LATE_REPORT_S``)."""
    now = time.time()
    for job in jobs:
        if job.slurm_job_id is None or job.state is not JobState.ENDED or job.ended_at is None:
            continue
        if now - job.ended_at > LATE_REPORT_S:
            continue
        report = read_report(store.logs_dir, job.slurm_job_id)
        if report is not None:
            set_slurm_usage(store, job.id, report)
            remove_report(store.logs_dir, job.slurm_job_id)


def _usage(store: JobStore, job: Job, state: JobState, ran: bool) -> str | None:
    """What the node reported the job used (so far); at its end, why nothing, if nothing."""
    slurm_job_id = job.slurm_job_id or 0
    if state is JobState.WAITING:
        return None
    report = read_report(store.logs_dir, slurm_job_id)
    if state is not JobState.ENDED:
        return report
    if report is None:
        return not_measured_text(NOT_DELIVERED) if ran else None
    remove_report(store.logs_dir, slurm_job_id)
    return report


def _apply(store: JobStore, job: Job, slurm: SlurmJob | None) -> None:
    if slurm is None:
        update_slurm_job(
            store,
            job.id,
            state=JobState.ENDED,
            note=f"Slurm job {job.slurm_job_id} is no longer in Slurm's queue",
            physical_indices=job.physical_indices,
            started_at=None,
            usage=_usage(store, job, JobState.ENDED, job.started_at is not None),
        )
        return
    state = slurm_state(slurm)
    note = clean(slurm.status_text)
    if state is JobState.RUNNING and slurm.nodes:
        note += f" on {clean(slurm.nodes)}"
    started = slurm.start_time if state is not JobState.WAITING else None
    if started is not None and started > time.time() + 60:
        started = None  # a pending job's start_time is Slurm's estimate, not a start
    ended = slurm.end_time if state is JobState.ENDED else None
    if ended is not None and (ended > time.time() + 60 or (started and ended < started)):
        ended = None  # not an end Slurm saw: the row takes the time it learnt of it
    update_slurm_job(
        store,
        job.id,
        state=state,
        note=note,
        physical_indices=slurm.gpu_indices or job.physical_indices,
        started_at=started,
        exit_code=slurm.exit_code if state is JobState.ENDED else None,
        signal=slurm.signal if state is JobState.ENDED else None,
        usage=_usage(store, job, state, job.started_at is not None or slurm.state in _RAN),
        ended_at=ended,
    )
