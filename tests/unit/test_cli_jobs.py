"""`gputop jobs`: the table, the JSON schema, logs, and stopping with a confirmation."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from helpers.jobs import (
    V100,
    job,
    launch,
    probe_command,
    wait_until_ended,
    wait_until_running,
    wait_until_waiting,
)

from gputop.cli.main import main
from gputop.core.jobs.model import Job


def gputop(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class Terminal(io.StringIO):
    """A stdin that is a terminal, with a person's answer typed in."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def finished(state_dir: Path, tmp_path: Path) -> Job:
    started = launch(
        state_dir, probe_command(tmp_path / "f.json", "--say", "final words"), gpus=(3, 1)
    )
    return wait_until_ended(state_dir, started.id)


@pytest.fixture
def running(state_dir: Path, tmp_path: Path) -> Job:
    started = launch(state_dir, probe_command(tmp_path / "r.json", "--sleep", "30"), gpus=(2,))
    return wait_until_running(state_dir, started.id)


def test_json_lists_jobs_with_the_documented_fields(
    finished: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = gputop(capsys, "jobs", "--json")
    (record,) = json.loads(out)
    assert code == 0
    assert set(record) >= {
        "id", "name", "command", "cwd", "gpus", "uuids", "status", "exit_code", "signal", "pid",
        "log_path", "created_at", "started_at", "ended_at", "mode",
    }  # fmt: skip
    assert record["id"] == finished.id and record["name"] == "job_probe.py"
    assert record["gpus"] == [3, 1] and record["uuids"] == [V100[3], V100[1]]
    assert record["status"] == "exited" and record["exit_code"] == 0 and record["signal"] is None
    assert record["command"] == list(finished.command) and record["mode"] == "detached"
    assert record["pid"] == finished.pid and record["log_path"] == finished.log_path
    assert isinstance(record["started_at"], float) and isinstance(record["ended_at"], float)


def test_the_table_shows_each_job_with_its_last_log_line(
    finished: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = gputop(capsys, "jobs")
    header, row = out.splitlines()
    assert code == 0
    assert header.split() == [
        "ID", "NAME", "GPUS", "STATUS", "STARTED", "DURATION", "GPU", "TIME", "PEAK", "MEM", "SM",
        "ACTIVE", "LAST", "LINE",
    ]  # fmt: skip
    assert row.split()[:5] == [str(finished.id), "job_probe.py", "3,1", "exited", "0"]
    assert row.endswith("final words")


def test_the_table_shows_why_a_job_waits(
    state_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "v100x4")
    queued = launch(state_dir, ["true"], gpus=(0,), wait=True)
    wait_until_waiting(state_dir, queued.id)
    _, out, _ = gputop(capsys, "jobs")
    row = out.splitlines()[1]
    assert row.split()[:4] == [str(queued.id), "true", "0", "waiting"]
    assert "waiting: GPU 0: 2 processes of ubuntu" in row and "[gputop]" not in row


def test_with_no_jobs_the_list_says_how_to_launch_one(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = gputop(capsys, "jobs")
    assert code == 0 and "No jobs yet" in out and "gputop run" in out


def test_a_reader_refuses_a_damaged_store_and_leaves_it(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir.mkdir(mode=0o700)
    (state_dir / "jobs.sqlite3").write_bytes(b"garbage" * 100)
    code, out, err = gputop(capsys, "jobs", "--json")  # a reader: never moves it aside
    assert code == 1 and out == ""
    assert "file is not a database" in err and "It was left as it is" in err
    assert (state_dir / "jobs.sqlite3").read_bytes() == b"garbage" * 100
    assert not list(state_dir.glob("jobs.sqlite3.corrupt-*"))


def test_log_prints_the_jobs_log(finished: Job, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = gputop(capsys, "jobs", "log", str(finished.id))
    assert code == 0 and out == Path(finished.log_path).read_text()
    assert "final words" in out


def test_log_follow_prints_until_the_job_ends(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = launch(
        state_dir, probe_command(tmp_path / "p.json", "--say", "first", "--sleep", "0.5")
    )
    code, out, _ = gputop(capsys, "jobs", "log", str(started.id), "--follow")
    assert code == 0
    assert "first" in out and f"job {started.id} exited 0" in out
    assert job(state_dir, started.id).status_text == "exited 0"


def test_log_of_an_unknown_job_says_there_is_none(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = gputop(capsys, "jobs", "log", "99")
    assert code == 1 and "There is no job 99" in err


def test_stop_with_yes_stops_a_running_job(
    state_dir: Path, running: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = gputop(capsys, "jobs", "stop", str(running.id), "--yes")
    assert code == 0
    assert out.strip() == f"Job {running.id} (job_probe.py) stopped: killed (SIGTERM)."


def test_stop_without_a_terminal_and_without_yes_refuses(
    state_dir: Path,
    running: Job,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, _, err = gputop(capsys, "jobs", "stop", str(running.id))
    assert code == 2
    assert "no terminal to ask on: add --yes" in err
    assert job(state_dir, running.id).status == "running"


def test_stop_asks_on_a_terminal_and_no_keeps_the_job(
    state_dir: Path,
    running: Job,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, _ = gputop(capsys, "jobs", "stop", str(running.id))
    question = f"Stop job {running.id} (job_probe.py) on GPU 2, pid {running.pid}? [y/N] "
    assert code == 1 and out == question + "Not stopped.\n"
    assert job(state_dir, running.id).status == "running"


def test_stop_asks_on_a_terminal_and_yes_stops_the_job(
    state_dir: Path,
    running: Job,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, _, _ = gputop(capsys, "jobs", "stop", str(running.id))
    assert code == 0 and job(state_dir, running.id).status == "killed"


def test_stopping_an_ended_job_exits_1_saying_how_it_ended(
    finished: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = gputop(capsys, "jobs", "stop", str(finished.id), "--yes")
    assert code == 1
    assert err == f"gputop: Job {finished.id} has already ended (exited 0).\n"


def test_a_job_id_must_be_a_number(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["jobs", "stop", "train"])
    assert exit_.value.code == 2
    assert "'train' is not a job id" in capsys.readouterr().err
