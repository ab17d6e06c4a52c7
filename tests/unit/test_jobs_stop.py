"""Stopping a job ends its whole process group, and records the end."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import pytest
from helpers.jobs import (
    gone,
    job,
    launch,
    probe_command,
    read_probe,
    wait_until_ended,
    wait_until_running,
    wait_until_waiting,
)
from helpers.waiting import wait_for

from gputop.core.errors import GputopError
from gputop.core.jobs.model import JobState
from gputop.core.jobs.stop import JobNotRunning, stop_job
from gputop.core.jobs.store import JobStore


def test_stopping_ends_the_whole_group_with_sigkill_for_what_ignores_sigterm(
    state_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "p.json"
    started = launch(
        state_dir, probe_command(out, "--child-ignoring-term", "--sleep", "30"), grace_s=0.5
    )
    report = read_probe(out)
    wait_until_running(state_dir, started.id)
    with JobStore.open(state_dir) as store:
        message = stop_job(store, started.id, wait_s=15)
    assert message == f"Job {started.id} ({started.name}) stopped: killed (SIGTERM)."
    assert gone(report["pid"]) and gone(report["child_pid"])
    assert "SIGKILL sent" in Path(started.log_path).read_text()


def test_a_waiting_job_that_is_stopped_never_starts(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "v100x4")
    out = tmp_path / "p.json"
    queued = launch(state_dir, probe_command(out), gpus=(0,), wait=True)
    wait_until_waiting(state_dir, queued.id)
    with JobStore.open(state_dir) as store:
        stop_job(store, queued.id, wait_s=10)
    ended = wait_until_ended(state_dir, queued.id)
    assert ended.status_text == "killed (never started)"
    assert ended.pid is None and ended.started_at is None and not out.exists()


def test_stopping_an_ended_job_says_how_it_ended(state_dir: Path, tmp_path: Path) -> None:
    started = launch(state_dir, probe_command(tmp_path / "p.json"))
    wait_until_ended(state_dir, started.id)
    with (
        JobStore.open(state_dir) as store,
        pytest.raises(JobNotRunning, match=rf"Job {started.id} has already ended \(exited 0\)"),
    ):
        stop_job(store, started.id)


def test_a_job_whose_supervisor_was_killed_is_stopped_directly(
    state_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "p.json"
    started = launch(state_dir, probe_command(out, "--sleep", "30"), grace_s=1)
    probe_pid = read_probe(out)["pid"]
    running = wait_until_running(state_dir, started.id)
    assert running.supervisor_pid is not None
    os.kill(running.supervisor_pid, signal.SIGKILL)
    wait_for(lambda: gone(running.supervisor_pid or 0), "the supervisor to die")
    lost = job(state_dir, started.id)
    assert lost.state is JobState.LOST and "was still running when" in (lost.note or "")

    with JobStore.open(state_dir) as store:
        message = stop_job(store, started.id)
    assert "stopped (SIGTERM to its process group)" in message
    assert gone(probe_pid)
    assert job(state_dir, started.id).status_text == "killed (SIGTERM)"


def test_a_job_of_another_host_is_not_stopped_from_here(state_dir: Path, tmp_path: Path) -> None:
    started = launch(state_dir, probe_command(tmp_path / "p.json", "--sleep", "30"))
    wait_until_running(state_dir, started.id)
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    connection.execute("UPDATE jobs SET host = 'elsewhere' WHERE id = ?", (started.id,))
    connection.commit()
    connection.close()
    with JobStore.open(state_dir) as store, pytest.raises(GputopError, match="runs on elsewhere"):
        stop_job(store, started.id)


def test_a_grace_period_given_at_stop_time_is_recorded(state_dir: Path, tmp_path: Path) -> None:
    started = launch(state_dir, probe_command(tmp_path / "p.json", "--sleep", "30"))
    wait_until_running(state_dir, started.id)
    with JobStore.open(state_dir) as store:
        stop_job(store, started.id, grace_s=2.5, wait_s=10)
        assert store.get(started.id).grace_s == 2.5
