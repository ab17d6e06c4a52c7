"""The dashboard's jobs service: one owner of the store and the log tails, without Textual."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from helpers.jobs import asked_job

from gputop.core.jobs.service import JobsService
from gputop.core.jobs.store import JobStore


def _service(state_dir: Path, problems: list[tuple[str, str]]) -> JobsService:
    return JobsService(
        state_dir,
        user="tester",
        cwd="/tmp",
        job_environ={"PATH": "/usr/bin"},
        report=lambda text, severity: problems.append((text, severity)),
    )


def _record_job(state_dir: Path, log_line: str) -> int:
    store = JobStore.open(state_dir)
    try:
        job = store.create_job(
            asked_job(
                name="train",
                command=["python", "train.py"],
                cwd="/tmp",
                env={"CUDA_VISIBLE_DEVICES": "GPU-0"},
            )
        )
    finally:
        store.close()
    Path(job.log_path).write_text(f"starting\n{log_line}\n", encoding="utf-8")
    return job.id


def test_reading_gives_the_jobs_with_the_last_line_of_each_log(tmp_path: Path) -> None:
    problems: list[tuple[str, str]] = []
    job_id = _record_job(tmp_path / "state", "epoch 3 of 10")
    view = _service(tmp_path / "state", problems).read_now(snapshot=None)
    assert view is not None
    assert [job.id for job in view.jobs] == [job_id]
    assert view.last_lines == {job_id: "epoch 3 of 10"}
    assert problems == []


def test_a_store_that_cannot_be_opened_is_reported_once_and_read_as_nothing(
    tmp_path: Path,
) -> None:
    problems: list[tuple[str, str]] = []
    not_a_directory = tmp_path / "state"
    not_a_directory.write_text("", encoding="utf-8")
    assert _service(not_a_directory, problems).read_now(snapshot=None) is None
    assert len(problems) == 1
    assert problems[0][0].startswith("Jobs unavailable: ") and problems[0][1] == "error"


def test_two_threads_reading_at_once_each_see_every_log_line(tmp_path: Path) -> None:
    problems: list[tuple[str, str]] = []
    job_id = _record_job(tmp_path / "state", "loss 0.25")
    service = _service(tmp_path / "state", problems)
    seen: list[str] = []

    def read_many() -> None:
        store = service.open_store()  # each thread its own connection
        try:
            for _ in range(50):
                view = service.read(store, snapshot=None)
                assert view is not None
                seen.append(view.last_lines[job_id])
        finally:
            assert store is not None
            store.close()

    threads = [threading.Thread(target=read_many) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == ["loss 0.25"] * 100
    assert problems == []


def test_launches_inherit_the_environment_given_or_else_this_process_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_SERVICE_PROBE", "1")
    given = _service(tmp_path, [])
    inherited = JobsService(tmp_path, user="u", cwd="/", job_environ=None, report=print)
    assert given.job_environ() == {"PATH": "/usr/bin"}
    assert inherited.job_environ()["GPUTOP_SERVICE_PROBE"] == "1"


def test_the_command_history_is_read_oldest_first(tmp_path: Path) -> None:
    store = JobStore.open(tmp_path / "state")
    try:
        store.add_history("python a.py")
        store.add_history("python b.py")
    finally:
        store.close()
    assert _service(tmp_path / "state", []).history() == ("python a.py", "python b.py")


def test_no_store_means_no_history_rather_than_an_error(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "state"
    not_a_directory.write_text("", encoding="utf-8")
    assert _service(not_a_directory, []).history() == ()
