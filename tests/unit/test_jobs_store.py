"""The job store: private, shared safely by many writers, and never losing a job silently."""

from __future__ import annotations

import multiprocessing
import os
import re
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest
from helpers.jobs import V100, all_jobs, asked_job, launch, probe_command, wait_until_ended
from helpers.store_writer import write_jobs

from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.jobs.store import JobNotFound, JobStore, StoreError, default_state_dir
from gputop.core.jobs.store_rows import ProcessSeen, ended, lost, supervisor_seen
from gputop.core.process_control import process_start_time


def make_job(store: JobStore, name: str = "train.py", **overrides: object) -> Job:
    fields: dict[str, object] = {
        "physical_indices": [3, 1],
        "uuids": [V100[3], V100[1]],
        "env": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "x"},
    }
    return store.create_job(asked_job(name, **{**fields, **overrides}))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_store_directory_is_0700_and_its_files_0600(state_dir: Path) -> None:
    with JobStore.open() as store:
        job = make_job(store)
    assert mode(state_dir) == 0o700
    assert mode(state_dir / "logs") == 0o700
    files = [p for p in state_dir.iterdir() if p.is_file()]
    assert {p.name for p in files} >= {"jobs.sqlite3"}
    assert all(mode(p) == 0o600 for p in files), {p.name: oct(mode(p)) for p in files}
    assert mode(Path(job.log_path)) == 0o600


def test_an_existing_state_directory_open_to_others_is_made_private(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o755)
    os.chmod(state_dir, 0o755)
    JobStore.open().close()
    assert mode(state_dir) == 0o700


def test_the_state_directory_follows_gputop_state_dir_then_xdg_then_home() -> None:
    assert default_state_dir({"GPUTOP_STATE_DIR": "/s", "XDG_STATE_HOME": "/x"}) == Path("/s")
    assert default_state_dir({"XDG_STATE_HOME": "/x", "HOME": "/h"}) == Path("/x/gputop")
    assert default_state_dir({"HOME": "/h"}) == Path("/h/.local/state/gputop")
    assert default_state_dir({"XDG_STATE_HOME": "relative", "HOME": "/h"}) == Path(
        "/h/.local/state/gputop"
    )


def test_a_job_reads_back_as_it_was_recorded(state_dir: Path) -> None:
    with JobStore.open() as store:
        created = make_job(store, "a.py", mode=RunMode.TMUX, grace_s=3.0)
    with JobStore.open() as store:
        (read,) = store.list_jobs()
    assert read == created
    assert read.physical_indices == (3, 1) and read.uuids == (V100[3], V100[1])
    assert read.state is JobState.WAITING and read.mode is RunMode.TMUX and read.grace_s == 3.0
    assert read.log_path == str(state_dir / "logs" / f"{read.id}.log")


def test_an_unknown_job_id_is_a_clear_error(state_dir: Path) -> None:
    with JobStore.open() as store, pytest.raises(JobNotFound, match="There is no job 42"):
        store.get(42)


def test_history_is_deduplicated_newest_last_and_kept_across_runs(state_dir: Path) -> None:
    with JobStore.open() as store:
        for command in ("python a.py", "python b.py", "python a.py"):
            store.add_history(command)
    with JobStore.open() as store:
        assert store.history() == ["python b.py", "python a.py"]


def test_a_corrupt_store_is_moved_aside_with_a_notice_and_a_new_one_started(
    state_dir: Path,
) -> None:
    state_dir.mkdir(mode=0o700)
    (state_dir / "logs").mkdir(mode=0o700)
    (state_dir / "logs" / "7.log").write_text("an old job's output\n")
    garbage = b"this is not a database, just garbage " * 200
    (state_dir / "jobs.sqlite3").write_bytes(garbage)

    with pytest.raises(StoreError, match="It was left as it is"):
        JobStore.open()  # a reader never moves a store aside
    assert (state_dir / "jobs.sqlite3").read_bytes() == garbage
    with JobStore.open(repair=True) as store:
        (notice,) = store.notices
        moved = [p for p in state_dir.iterdir() if p.name.startswith("jobs.sqlite3.corrupt-")]
        assert len(moved) == 1
        assert moved[0].read_bytes() == garbage
        assert str(moved[0]) in notice and "moved aside" in notice
        assert "0 jobs read back from it and 1 rebuilt from their logs" in notice
        (rebuilt,) = store.list_jobs()
        assert rebuilt.id == 7 and rebuilt.state is JobState.LOST
        assert rebuilt.log_path == str(state_dir / "logs" / "7.log")
        assert make_job(store).id == 8  # after the old logs' ids: no old log is appended to
    assert (state_dir / "logs" / "7.log").read_text() == "an old job's output\n"


def test_a_store_from_a_newer_gputop_is_refused_and_left_untouched(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    path = state_dir / "jobs.sqlite3"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE future (x)")
    connection.execute("PRAGMA user_version = 99")
    connection.commit()
    connection.close()
    before = path.read_bytes()

    with pytest.raises(StoreError, match="written by a newer gputop") as error:
        JobStore.open()
    assert str(path) in str(error.value)
    assert path.read_bytes() == before
    assert not any(p.name.startswith("jobs.sqlite3.corrupt") for p in state_dir.iterdir())


def test_a_state_directory_that_cannot_be_created_names_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="Cannot create the job store directory") as error:
        JobStore.open(blocker / "state")
    assert str(blocker / "state") in str(error.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root is not restricted by directory modes")
def test_an_unwritable_state_directory_names_the_path(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        with pytest.raises(StoreError, match=re.escape(str(locked / "state"))):
            JobStore.open(locked / "state")
    finally:
        os.chmod(locked, 0o700)


def test_a_job_whose_supervisor_vanished_is_marked_lost(state_dir: Path) -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    with JobStore.open() as store:
        job = make_job(store)
        store.record(job.id, supervisor_seen(ProcessSeen(ended.pid, None, None)))
        (listed,) = store.list_jobs()
    assert listed.state is JobState.LOST and listed.status_text == "lost"
    assert listed.note is not None and f"pid {ended.pid}" in listed.note


def test_a_job_whose_supervisor_lives_is_not_marked_lost(state_dir: Path) -> None:
    living = subprocess.Popen(["sleep", "30"])
    try:
        with JobStore.open() as store:
            job = make_job(store)
            seen = ProcessSeen(living.pid, process_start_time(living.pid), None)
            store.record(job.id, supervisor_seen(seen))
            assert store.get(job.id).state is JobState.WAITING
    finally:
        living.kill()
        living.wait()


def test_a_recorded_end_is_kept_even_for_a_job_taken_as_lost(state_dir: Path) -> None:
    with JobStore.open() as store:
        job = make_job(store)
        store.record(job.id, lost("gone", None))
        store.record(job.id, ended(exit_code=0))
        assert store.get(job.id).status_text == "exited 0"


def test_several_writers_at_once_leave_the_store_intact(state_dir: Path, tmp_path: Path) -> None:
    JobStore.open().close()
    writers, per_writer = 8, 12
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=write_jobs, args=(str(state_dir), worker, per_writer, V100))
        for worker in range(writers)
    ]
    for process in processes:
        process.start()
    real = [
        launch(state_dir, probe_command(tmp_path / f"r{code}.json", "--exit", str(code)))
        for code in range(3)
    ]
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    for job in real:
        wait_until_ended(state_dir, job.id)

    jobs = all_jobs(state_dir)
    assert len(jobs) == writers * per_writer + len(real)
    assert len({job.id for job in jobs}) == len(jobs)
    for worker in range(writers):
        mine = [job for job in jobs if job.name.startswith(f"writer-{worker}-")]
        assert len(mine) == per_writer
        assert all(job.status_text == f"{'exited' if worker == 0 else 'failed'} {worker}"
                   for job in mine)  # fmt: skip
    assert [job.exit_code for job in jobs if job.id in {r.id for r in real}] == [0, 1, 2]
    with JobStore.open() as store:
        assert len(store.history(limit=1000)) == writers * per_writer + len(real)
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    connection.close()
