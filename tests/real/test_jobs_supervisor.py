"""The supervisor: waits for free cards, runs the job, records how it ended."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.jobs import (
    PYTHON,
    job,
    launch,
    probe_command,
    read_probe,
    snapshot_of,
    wait_until_ended,
    wait_until_waiting,
)
from helpers.waiting import wait_for

from gputop.core.free_cards import FreePolicy
from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.jobs.waiting import wait_decision


def waiting_job(gpus: tuple[int, ...] = (), wait_count: int | None = None) -> Job:
    return Job(
        id=9,
        name="train.py",
        command=("python", "train.py"),
        command_text="python train.py",
        uses_shell=False,
        cwd="/",
        physical_indices=gpus,
        uuids=(),
        env={},
        mode=RunMode.DETACHED,
        state=JobState.WAITING,
        log_path="/dev/null",
        created_at=0.0,
        wait_for_free=True,
        wait_count=wait_count,
    )


# --- the decision to start -------------------------------------------------------------------


def test_a_job_waiting_for_a_free_card_may_start_at_once() -> None:
    decision = wait_decision(snapshot_of(), waiting_job((2,)), FreePolicy(), "me", {})
    assert decision.ready and decision.physical_indices == (2,)


def test_a_job_waiting_for_a_card_another_user_uses_must_wait_and_says_why() -> None:
    decision = wait_decision(snapshot_of(), waiting_job((2, 0)), FreePolicy(), "me", {})
    assert not decision.ready
    assert decision.reason.startswith("GPU 0: ") and "2 processes of ubuntu" in decision.reason


def test_a_card_a_running_gputop_job_uses_is_not_free() -> None:
    decision = wait_decision(snapshot_of(), waiting_job((2,)), FreePolicy(), "me", {4: (2,)})
    assert not decision.ready and "in use by gputop job 4" in decision.reason


def test_an_auto_job_takes_free_cards_once_enough_are_free() -> None:
    decision = wait_decision(snapshot_of(), waiting_job(wait_count=1), FreePolicy(), "me", {})
    assert decision.ready and decision.physical_indices == (2,)
    decision = wait_decision(snapshot_of(), waiting_job(wait_count=4), FreePolicy(), "me", {})
    assert not decision.ready and decision.reason.startswith("Asked for 4 free GPUs")


# --- running ---------------------------------------------------------------------------------


def test_exit_codes_and_signals_are_recorded(state_dir: Path, tmp_path: Path) -> None:
    launched = {
        "exited 0": launch(state_dir, probe_command(tmp_path / "a.json")),
        "failed 3": launch(state_dir, probe_command(tmp_path / "b.json", "--exit", "3")),
        "killed (SIGTERM)": launch(
            state_dir, probe_command(tmp_path / "c.json", "--kill-self", "TERM")
        ),
    }
    for expected, started in launched.items():
        ended = wait_until_ended(state_dir, started.id)
        assert ended.status_text == expected
        assert ended.started_at is not None and ended.ended_at is not None
        assert ended.ended_at >= ended.started_at
    assert wait_until_ended(state_dir, launched["failed 3"].id).exit_code == 3
    assert wait_until_ended(state_dir, launched["killed (SIGTERM)"].id).signal == 15


def test_a_job_waiting_for_a_free_card_starts_at_once(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "v100x4")
    started = launch(state_dir, probe_command(tmp_path / "p.json"), gpus=(2,), wait=True)
    assert wait_until_ended(state_dir, started.id).status_text == "exited 0"


def test_a_job_waiting_for_a_busy_card_shows_as_waiting_with_the_reason(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "v100x4")
    out = tmp_path / "p.json"
    queued = launch(state_dir, probe_command(out), gpus=(0,), wait=True)
    waiting = wait_until_waiting(state_dir, queued.id)
    assert waiting.status == "waiting" and waiting.pid is None
    assert waiting.note is not None and "GPU 0: 2 processes of ubuntu" in waiting.note
    assert f"job {queued.id} is waiting: GPU 0: " in Path(queued.log_path).read_text()
    assert not out.exists()


def test_only_one_of_two_jobs_waiting_for_the_same_card_starts(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "v100x4")
    first, second = (
        launch(state_dir, probe_command(tmp_path / f"{n}.json", "--sleep", "30"), gpus=(2,),
               wait=True)
        for n in range(2)
    )  # fmt: skip
    running = wait_for(
        lambda: [j for j in (job(state_dir, first.id), job(state_dir, second.id)) if j.pid],
        "one of them to start",
    )
    other = second.id if running[0].id == first.id else first.id
    wait_until_waiting(state_dir, other)
    # Its reason is first "job N has just taken a card", then, on its next look at the cards,
    # "in use by gputop job N": wait for the settled one.
    reason = f"in use by gputop job {running[0].id}"
    waiting = wait_for(
        lambda: (
            (j := job(state_dir, other)).state is JobState.WAITING
            and reason in (j.note or "")
            and j
        ),
        "the other job to wait for the first one's card",
    )
    assert len(running) == 1 and waiting.pid is None


def test_an_auto_job_waits_until_enough_cards_are_free(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "v100x4")
    queued = launch(state_dir, [PYTHON, "-c", "pass"], gpus=(), wait_count=4)
    waiting = wait_until_waiting(state_dir, queued.id)
    assert waiting.status == "waiting" and waiting.gpus_text == "any 4"
    assert "Asked for 4 free GPUs" in (waiting.note or "")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_tmux_mode_runs_the_job_in_a_new_window_on_a_terminal(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    socket = tmp_path / "tmux.sock"
    server = ["tmux", "-S", str(socket)]
    subprocess.run([*server, "new-session", "-d", "-s", "t", "sleep 60"], check=True)
    try:
        pid = subprocess.run(
            [*server, "display-message", "-p", "#{pid}"], capture_output=True, text=True
        ).stdout.strip()
        monkeypatch.setenv("TMUX", f"{socket},{pid},0")
        out = tmp_path / "p.json"
        started = launch(
            state_dir, probe_command(out, "--say", "hello pane"), gpus=(3,), mode=RunMode.TMUX
        )
        report = read_probe(out)
        assert report["stdin_is_tty"] and report["sid"] == report["pid"]
        assert report["env"]["CUDA_VISIBLE_DEVICES"] == started.uuids[0]
        windows = subprocess.run(
            [*server, "list-windows", "-F", "#{window_name}"], capture_output=True, text=True
        ).stdout.split()
        assert f"gputop-{started.id}" in windows
        ended = wait_until_ended(state_dir, started.id)
        assert ended.status_text == "exited 0"
        wait_for(lambda: "hello pane" in Path(started.log_path).read_text(), "the log")
    finally:
        subprocess.run([*server, "kill-server"], check=False)
