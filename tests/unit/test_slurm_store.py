"""The job store records a Slurm job's id (schema 3) and never takes one as lost."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers.jobs import asked_job

from gputop.core.jobs.model import JobState
from gputop.core.jobs.store import NEVER_STARTED_AFTER_S, JobStore
from gputop.core.jobs.usage import not_measured_text, usage_summary
from gputop.core.slurm.job_rows import record_slurm_job, update_slurm_job


def record(store: JobStore, slurm_job_id: int = 41) -> int:
    job = record_slurm_job(
        store,
        slurm_job_id=slurm_job_id,
        name="train",
        command=["python", "train.py"],
        command_text="python train.py",
        cwd="/",
        log_path=str(store.logs_dir / f"slurm-{slurm_job_id}.log"),
    )
    return job.id


def test_a_slurm_job_reads_back_with_its_slurm_id_waiting_and_without_cards(
    private_state_dir: Path,
) -> None:
    with JobStore.open(private_state_dir) as store:
        job = store.get(record(store))

    assert (job.slurm_job_id, job.state, job.physical_indices) == (41, JobState.WAITING, ())
    assert job.to_json()["slurm_job_id"] == 41


def test_a_slurm_job_without_a_supervisor_is_never_marked_lost(private_state_dir: Path) -> None:
    with JobStore.open(private_state_dir) as store:
        job_id = record(store)
    with sqlite3.connect(private_state_dir / "jobs.sqlite3") as connection:
        connection.execute(
            "UPDATE jobs SET created_at = created_at - ?", (NEVER_STARTED_AFTER_S + 60,)
        )
    with JobStore.open(private_state_dir) as store:
        assert store.get(job_id).state is JobState.WAITING
        store.list_jobs()
        assert store.get(job_id).state is JobState.WAITING


def test_slurms_cards_and_end_are_recorded_and_an_end_is_final(private_state_dir: Path) -> None:
    with JobStore.open(private_state_dir) as store:
        job_id = record(store)
        update_slurm_job(
            store,
            job_id,
            state=JobState.RUNNING,
            note="Running",
            physical_indices=[2],
            started_at=5.0,
        )
        update_slurm_job(
            store,
            job_id,
            state=JobState.ENDED,
            note="Completed",
            physical_indices=[2],
            started_at=None,
            exit_code=0,
        )
        update_slurm_job(
            store,
            job_id,
            state=JobState.RUNNING,
            note="Running",
            physical_indices=[3],
            started_at=9.0,
        )
        job = store.get(job_id)

    assert (job.state, job.physical_indices, job.started_at, job.status_text) == (
        JobState.ENDED,
        (2,),
        5.0,
        "Completed",
    )


def test_a_store_of_schema_2_gains_the_slurm_column_and_keeps_its_jobs(
    private_state_dir: Path,
) -> None:
    with JobStore.open(private_state_dir) as store:
        old = store.create_job(asked_job(name="old.py", physical_indices=[1], uuids=[]))
    with sqlite3.connect(private_state_dir / "jobs.sqlite3") as connection:
        connection.execute("ALTER TABLE jobs DROP COLUMN slurm_job_id")
        connection.execute("ALTER TABLE jobs DROP COLUMN usage")  # added in version 4
        connection.execute("PRAGMA user_version = 2")

    with JobStore.open(private_state_dir) as store:
        kept = store.get(old.id)
        new = store.get(record(store))

    assert (kept.name, kept.slurm_job_id, new.slurm_job_id) == ("old.py", None, 41)


def test_why_a_slurm_jobs_use_was_not_measured_is_kept_and_moves_with_the_job(
    private_state_dir: Path, tmp_path: Path
) -> None:
    why = "not measured on node07: NVML cannot be read there"
    with JobStore.open(private_state_dir) as store:
        job_id = record(store)
        update_slurm_job(
            store,
            job_id,
            state=JobState.ENDED,
            note="Completed",
            physical_indices=[2],
            started_at=5.0,
            exit_code=0,
            usage=not_measured_text(why),
        )
        job = store.get(job_id)
    assert (job.usage, job.usage_note) == (None, why)
    assert (job.to_json()["usage"], job.to_json()["usage_note"]) == (None, why)
    assert usage_summary(job.usage, job.usage_note) == f"GPU use: {why}"  # the log view

    with JobStore.open(tmp_path / "other") as other:
        assert other.adopt(job)
        assert other.get(job_id).usage_note == why
