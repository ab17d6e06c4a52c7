"""A Slurm job's row in the job store (docs/slurm.md): recorded once ``sbatch`` accepted
it, then kept in step with what Slurm reports (sync.py). Slurm runs the job, not a gputop
supervisor, so its row is written through the store's ``insert_job`` and changed by
transitions (jobs/store_rows.py) as every job's; the job store knows nothing of Slurm."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_rows import NOT_ENDED, Transition
from gputop.core.numbers import valid_text
from gputop.core.process_control import current_boot_id


def record_slurm_job(
    store: JobStore,
    *,
    slurm_job_id: int,
    name: str,
    command: Sequence[str],
    command_text: str,
    cwd: str,
    log_path: str,
) -> Job:
    """Record a job ``sbatch`` accepted: waiting until Slurm runs it.

    Its log is the output file Slurm writes; its cards are Slurm's choice, set by
    ``update_slurm_job`` once Slurm reports them.
    """
    return store.insert_job(
        Job(
            name=name,
            command=tuple(command),
            command_text=command_text,
            uses_shell=False,
            cwd=cwd,
            physical_indices=(),
            uuids=(),
            env={},
            log_path=log_path,
            created_at=time.time(),
            host=store.host,
            boot_id=current_boot_id(),
            slurm_job_id=slurm_job_id,
        )
    )


def update_slurm_job(
    store: JobStore,
    job_id: int,
    *,
    state: JobState,
    note: str | None,
    physical_indices: Sequence[int],
    started_at: float | None,
    exit_code: int | None = None,
    signal: int | None = None,
    usage: str | None = None,
    ended_at: float | None = None,
) -> None:
    """Copy what Slurm reports about a submitted job into its row (not once ended).

    ``usage``: the stored form of what it used so far, or of why that is not measured
    (jobs/usage.py), as its node's wrapper reported it (``None``: leave as recorded).
    ``ended_at``: when Slurm says it ended (``None``: now, for an ended job)."""
    if state is not JobState.ENDED:
        ended_at = None
    elif ended_at is None:
        ended_at = time.time()
    columns = {
        "state": state.value,
        "note": None if note is None else valid_text(note),  # a note is for a person: UTF-8
        "physical_indices": json.dumps(list(physical_indices), allow_nan=False),
        "started_at": started_at,
        "ended_at": ended_at,
        "exit_code": exit_code,
        "signal": signal,
    }
    if usage is not None:
        columns["usage"] = usage
    unless_set = frozenset({"started_at"})
    store.record(job_id, Transition(columns, states=NOT_ENDED, unless_set=unless_set))


def set_slurm_usage(store: JobStore, job_id: int, usage: str) -> None:
    """A Slurm job's usage report that came after its end (usage_file.py): any state."""
    store.record(job_id, Transition({"usage": usage}, states=None))
