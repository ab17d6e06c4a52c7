"""`gputop run`: launch pinned, print the mapping, return at once; refuse bad input cleanly."""

from __future__ import annotations

import json
import os
import pty
import signal
import sqlite3
from pathlib import Path

import psutil
import pytest
from helpers.jobs import (
    PROBE,
    PYTHON,
    V100,
    all_jobs,
    asked_job,
    job,
    probe_command,
    read_probe,
    supervisors_of,
    wait_until_ended,
    wait_until_waiting,
)
from helpers.pty_terminal import as_a_login_session
from helpers.waiting import wait_for

from gputop.cli.main import main
from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.jobs.stop import stop_job
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_rows import ended
from gputop.core.process_control import process_alive


def gputop_run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["run", "--fake", "v100x4", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def earlier_job(state_dir: Path) -> Job:
    """A job already in the store, which no failed launch may disturb."""
    with JobStore.open(state_dir) as store:
        created = store.create_job(asked_job(name="old.py", physical_indices=[1], uuids=[V100[1]]))
        store.record(created.id, ended(exit_code=0))
        return store.get(created.id)


def test_run_prints_the_job_the_cuda_mapping_and_the_log_and_the_job_sees_that_order(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.json"
    code, printed, _ = gputop_run(capsys, "--gpus", "3,1", "--", PYTHON, PROBE, str(out))
    assert code == 0
    assert "Job 1 (job_probe.py) launched detached." in printed
    assert "cuda:0 → GPU 3  Tesla V100-SXM2-16GB  GPU-80af15aa" in printed
    assert "cuda:1 → GPU 1  Tesla V100-SXM2-16GB  GPU-96870f72" in printed
    assert f"log:  {state_dir / 'logs' / '1.log'}" in printed
    env = read_probe(out)["env"]
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["CUDA_VISIBLE_DEVICES"] == f"{V100[3]},{V100[1]}"


def test_a_job_outlives_its_launcher_and_the_launchers_terminal(
    state_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "p.json"
    launcher = f"{PYTHON} -m gputop run --fake v100x4 --gpus 2 -- {PYTHON} {PROBE} {out} --sleep 30"
    terminal_pid, terminal = pty.fork()  # a login session: a shell on a terminal
    if terminal_pid == 0:
        try:
            as_a_login_session()
            os.execve("/bin/sh", ["sh", "-c", f"{launcher}; exec sleep 60"], dict(os.environ))
        finally:
            os._exit(127)
    try:
        report = read_probe(out)
        wait_for(lambda: psutil.Process(terminal_pid).name() == "sleep", "the launcher to exit")
        assert report["sid"] == report["pid"] != os.getsid(terminal_pid)
        os.killpg(terminal_pid, signal.SIGHUP)  # the connection drops
        os.close(terminal)
        os.waitpid(terminal_pid, 0)
    finally:
        if not process_exited(terminal_pid):
            os.kill(terminal_pid, signal.SIGKILL)
    job_id = int(report["env"]["GPUTOP_JOB_ID"])
    assert process_alive(report["pid"], None)
    # The supervisor records the start after the spawn: on a busy machine the job can report
    # (and the launcher exit) first.
    wait_for(lambda: job(state_dir, job_id).state is JobState.RUNNING, "the start recorded")
    with JobStore.open(state_dir) as store:
        stop_job(store, job_id, grace_s=1, wait_s=10)
    assert job(state_dir, job_id).status_text == "killed (SIGTERM)"


def process_exited(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpus", "7", "--", "true"], "There is no GPU 7. This machine has GPUs 0 "),
        (["--gpus", "GPU-dead", "--", "true"], "No GPU has an index or UUID starting with"),
        (["--gpus", "GPU-", "--", "true"], "The UUID prefix 'GPU-' is ambiguous"),
        (["--gpus", "1,1", "--", "true"], "GPU 1 is given twice"),
        (["--gpus", "0", "--"], "No command given"),
        (["--gpus", "0", "--", ""], "The command is empty"),
        (["--gpus", "0", "--cwd", "/no/such/dir", "--", "true"], "/no/such/dir does not exist"),
        (["--gpus", "0", "--", "python 'a.py"], "no closing quotation"),
        (["--gpus", "0", "--tmux", "--", "true"], "not running inside tmux"),
        (["--auto", "4", "--", "true"], "Asked for 4 free GPUs, but only 2 are free"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_launched(
    state_dir: Path,
    earlier_job: Job,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    code, printed, err = gputop_run(capsys, *argv)
    assert code != 0
    assert message in err and err.startswith("gputop: ") and "Traceback" not in err
    assert printed == ""
    assert all_jobs(state_dir) == [earlier_job]
    assert supervisors_of(state_dir) == []


def test_a_utilisation_past_100_is_refused_as_pick_refuses_it(
    state_dir: Path, earlier_job: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        gputop_run(capsys, "--gpus", "0", "--max-util", "101", "--", "true")
    assert exited.value.code == 2
    assert "101 is out of range: give from 0 to 100" in capsys.readouterr().err
    assert all_jobs(state_dir) == [earlier_job]


def test_an_unusable_state_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(blocker / "state"))
    code, _, err = gputop_run(capsys, "--gpus", "0", "--", "true")
    assert code == 1
    assert f"Cannot create the job store directory {blocker / 'state'}: not a directory" in err


def test_a_store_from_a_newer_gputop_is_refused_and_untouched(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir.mkdir(mode=0o700)
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    connection.execute("PRAGMA user_version = 7")
    connection.execute("CREATE TABLE jobs (id)")
    connection.commit()
    connection.close()
    before = (state_dir / "jobs.sqlite3").read_bytes()
    code, _, err = gputop_run(capsys, "--gpus", "0", "--", "true")
    assert code == 1 and "written by a newer gputop" in err
    assert (state_dir / "jobs.sqlite3").read_bytes() == before
    assert supervisors_of(state_dir) == []


def test_a_corrupt_store_is_moved_aside_and_the_launch_not_made(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir.mkdir(mode=0o700)
    (state_dir / "jobs.sqlite3").write_bytes(b"\x00garbage" * 512)
    code, _, err = gputop_run(capsys, "--gpus", "0", "--", "true")
    (moved,) = state_dir.glob("jobs.sqlite3.corrupt-*")
    assert code == 1
    assert f"gputop: notice: The job store {state_dir / 'jobs.sqlite3'} was damaged" in err
    assert str(moved) in err and "Nothing was launched" in err
    assert moved.read_bytes() == b"\x00garbage" * 512
    assert all_jobs(state_dir) == []


def test_auto_picks_free_cards_by_the_policy(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, printed, _ = gputop_run(capsys, "--auto", "1", "--", *probe_command(tmp_path / "p"))
    assert code == 0 and "cuda:0 → GPU 2" in printed
    assert read_probe(tmp_path / "p")["env"]["CUDA_VISIBLE_DEVICES"] == V100[2]


def test_wait_on_a_busy_card_queues_the_job_which_can_be_stopped(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, printed, _ = gputop_run(
        capsys, "--gpus", "0", "--wait", "--", *probe_command(tmp_path / "p")
    )
    assert code == 0 and "It waits until GPU 0 is free" in printed
    assert printed.splitlines()[0] == "Job 1 (job_probe.py) queued, to run detached."
    wait_until_waiting(state_dir, 1)
    assert job(state_dir, 1).status == "waiting"
    assert main(["jobs", "stop", "1", "--yes"]) == 0
    assert wait_until_ended(state_dir, 1).status_text == "killed (never started)"
    assert not (tmp_path / "p").exists()


def test_auto_with_wait_queues_when_too_few_cards_are_free(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, printed, _ = gputop_run(capsys, "--auto", "3", "--wait", "--", "true")
    assert code == 0 and "It waits until 3 GPUs are free" in printed
    assert job(state_dir, 1).gpus_text == "any 3"


def test_a_shell_command_is_said_to_need_a_shell(
    state_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHELL", "/bin/sh")
    code, printed, _ = gputop_run(capsys, "--gpus", "2", "--", "echo a | cat")
    assert code == 0 and "runs: /bin/sh -c 'echo a | cat'  (it needs a shell)" in printed


def test_a_program_not_on_path_gets_a_warning(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = gputop_run(capsys, "--gpus", "2", "--", "no-such-program-gputop")
    assert code == 0
    assert "warning: no-such-program-gputop was not found" in err


def test_json_prints_the_launched_job(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, printed, _ = gputop_run(capsys, "--gpus", "3,1", "--json", "--name", "n", "--", "true")
    document = json.loads(printed)
    assert code == 0 and document["id"] == 1 and document["name"] == "n"
    assert document["gpus"] == [3, 1] and document["uuids"] == [V100[3], V100[1]]


def test_run_onto_a_busy_card_warns_as_the_launch_dialog_does(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GPU 0 of v100x4: ubuntu's two processes at 70 % (issue 28). The job still starts."""
    from gputop.core.free_cards import FreePolicy, launch_warnings
    from gputop.core.sampling.source import open_backend
    from gputop.core.users import current_user

    backend = open_backend("v100x4", environ={})
    try:
        dialog = launch_warnings(backend.sample(), [0], current_user(), [], policy=FreePolicy())
    finally:
        backend.close()
    assert dialog and dialog[0].startswith("GPU 0 is busy: ")
    code, printed, err = gputop_run(capsys, "--gpus", "0", "--", "sleep", "20")
    assert code == 0 and "Job 1 " in printed
    warned = [line for line in err.splitlines() if line.startswith("gputop: warning: GPU 0 ")]
    assert [w.split(":")[1:3] for w in warned] == [[" warning", " GPU 0 is busy"]]
    assert "ubuntu" in warned[0] or "utilisation" in warned[0], warned
    stop_job_now(state_dir, 1)

    code, _, err = gputop_run(capsys, "--gpus", "2", "--", "sleep", "20")  # free: no word
    assert code == 0 and "GPU 2 is busy" not in err
    code, _, err = gputop_run(capsys, "--gpus", "2", "--", "sleep", "20")  # job 2 holds it
    claims = ("GPU 2 is in use by job 2 (sleep)", "GPU 2 is wanted by job 2 (sleep)")
    assert code == 0 and any(claim in err for claim in claims), err  # starting, or started
    for job_id in (2, 3):
        stop_job_now(state_dir, job_id)


def test_run_wait_onto_a_busy_card_says_it_waits_instead_of_warning(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, printed, err = gputop_run(capsys, "--gpus", "0", "--wait", "--", "true")
    assert code == 0 and "It waits until GPU 0 is free" in printed
    assert "is busy" not in err
    wait_until_waiting(state_dir, 1)
    assert main(["jobs"]) == 0
    listed = capsys.readouterr().out
    (row,) = [line for line in listed.splitlines() if line.lstrip().startswith("1 ")]
    assert " waiting " in row and "GPU 0: 2 processes of ubuntu, utilisation" in row, row
    stop_job_now(state_dir, 1)


def stop_job_now(state_dir: Path, job_id: int) -> None:
    assert main(["jobs", "stop", str(job_id), "--yes"]) == 0
    wait_until_ended(state_dir, job_id)


def test_a_waiting_job_says_why() -> None:
    from dataclasses import replace

    base = Job(
        id=1,
        name="t",
        command=("true",),
        command_text="true",
        uses_shell=False,
        cwd="/",
        physical_indices=(0,),
        uuids=("GPU-x",),
        env={},
        mode=RunMode.DETACHED,
        state=JobState.WAITING,
        log_path="/nonexistent.log",
        created_at=0.0,
    )
    assert base.status == "waiting"
    assert base.waiting_reason == "starting (its supervisor has not started it yet)"
    assert replace(base, wait_for_free=True).waiting_reason == "for its GPUs to be free"
    assert replace(base, wait_count=3).waiting_reason == "for 3 free GPUs"
    assert replace(base, note="GPU 0: busy").waiting_reason == "GPU 0: busy"
    from gputop.cli.jobs_command import render_table

    listed = render_table([base], 0.0).splitlines()[1]
    assert "waiting" in listed and "starting (its supervisor has not started it yet)" in listed
