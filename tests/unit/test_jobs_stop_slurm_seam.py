"""Stopping a job Slurm runs goes through the canceller the caller hands in: jobs know
nothing of Slurm (docs/architecture.md). The real ``scancel`` is tested against a real
cluster in test_slurm_submit.py; here, who hands which canceller to whom."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.dashboard import make_app

from gputop.core.errors import GputopError
from gputop.core.jobs.model import JobState
from gputop.core.jobs.service import JobsService
from gputop.core.jobs.stop import SlurmCanceller, stop_job
from gputop.core.jobs.store import JobStore
from gputop.core.slurm import submit
from gputop.core.slurm.commands import SlurmError
from gputop.core.slurm.job_rows import record_slurm_job

SLURM_JOB_ID = 4242


def _slurm_job(state_dir: Path) -> int:
    store = JobStore.open(state_dir)
    try:
        job = record_slurm_job(
            store,
            slurm_job_id=SLURM_JOB_ID,
            name="train",
            command=["python", "train.py"],
            command_text="python train.py",
            cwd="/tmp",
            log_path=str(state_dir / "slurm.log"),
        )
    finally:
        store.close()
    return job.id


def _service(state_dir: Path, cancel: SlurmCanceller | None) -> JobsService:
    return JobsService(
        state_dir,
        user="tester",
        cwd="/tmp",
        job_environ={},
        report=lambda text, severity: None,
        cancel_in_slurm=cancel,
    )


def test_the_dashboards_service_cancels_a_slurm_job_through_the_canceller_it_was_given(
    tmp_path: Path,
) -> None:
    job_id = _slurm_job(tmp_path)
    cancelled: list[int] = []

    said = _service(tmp_path, cancelled.append).stop(job_id)

    assert cancelled == [SLURM_JOB_ID]
    assert said == f"Job {job_id} cancelled in Slurm (scancel {SLURM_JOB_ID})."
    with JobStore.open(tmp_path) as store:
        assert store.get(job_id).stop_requested


def test_slurms_refusal_reaches_the_person_and_nothing_is_marked(tmp_path: Path) -> None:
    job_id = _slurm_job(tmp_path)

    def refuse(slurm_job_id: int) -> None:
        raise SlurmError(f"scancel: error: Invalid job id {slurm_job_id}")

    with pytest.raises(GputopError, match="Invalid job id 4242"):
        _service(tmp_path, refuse).stop(job_id)
    with JobStore.open(tmp_path) as store:
        job = store.get(job_id)
        assert job.state is JobState.WAITING and not job.stop_requested


def test_without_a_canceller_a_slurm_job_is_refused_with_what_to_do(tmp_path: Path) -> None:
    job_id = _slurm_job(tmp_path)
    with JobStore.open(tmp_path) as store, pytest.raises(GputopError) as refused:
        stop_job(store, job_id)
    assert str(refused.value) == (
        f"Job {job_id} runs in Slurm (job {SLURM_JOB_ID}): stop it with "
        f"gputop jobs stop {job_id}, or scancel {SLURM_JOB_ID}."
    )
    with JobStore.open(tmp_path) as store:
        assert not store.get(job_id).stop_requested


def test_the_dashboard_hands_its_jobs_service_slurms_scancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cancelled: list[int] = []
    monkeypatch.setattr(submit, "cancel", cancelled.append)  # scancel, imported when used
    app = make_app("v100x4")
    canceller = app.jobs_service.cancel_in_slurm
    assert canceller is not None
    canceller(SLURM_JOB_ID)
    assert cancelled == [SLURM_JOB_ID]
