"""A log cannot eat the disk (docs/faults.md): a size cap that keeps the beginning, a mark
and the newest lines, and a floor of free space under which the log stops growing while
the job runs on. Real jobs write the logs; the floor's test runs on a small tmpfs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import HELPERS
from helpers.jobs import launch, wait_for_job, wait_until_running
from helpers.waiting import wait_for

from gputop.cli.main import main
from gputop.core.jobs.logs import last_line
from gputop.core.numbers import parse_size
from gputop.core.process_control import process_alive
from gputop.tui.widgets.jobs_panel import job_cells

CHATTY = str(HELPERS / "chatty_job.py")
MARK = b"bytes of output left out here"


def chatty(*options: str) -> list[str]:
    return [sys.executable, CHATTY, *options]


def step_of(line: str | None) -> int:
    """The step number of a chatty job's line (``step 123 loss ...``); -1 for none."""
    parts = (line or "").split()
    return int(parts[1]) if len(parts) > 1 and parts[0] == "step" else -1


def test_sizes_are_read_in_bytes_or_with_a_unit() -> None:
    assert parse_size("1G", "--log-max") == 1024**3
    assert parse_size("512M", "--log-max") == 512 * 1024**2
    assert parse_size("64k", "--log-max") == 64 * 1024
    assert parse_size("2GiB", "--log-max") == 2 * 1024**3
    assert parse_size("70000", "--log-max") == 70000
    for bad in ("1e9", "-5", "٣G", "G", "1.5G", ""):
        with pytest.raises(ValueError, match="--log-max"):
            parse_size(bad, "--log-max")


@pytest.mark.parametrize("value", ["10k", "1e9", "lots"])
def test_run_refuses_a_log_cap_out_of_range(
    value: str, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["run", "--gpus", "0", "--log-max", value, "--", "true"])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "--log-max" in err and "size" in err
    assert not (state_dir / "jobs.sqlite3").exists()


def test_a_log_past_its_cap_keeps_its_beginning_a_mark_and_its_newest_lines(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cap = 256 * 1024
    lines = 20000  # about 2.3 MB: nine times the cap
    job = launch(state_dir, chatty("--lines", str(lines)), log_max_bytes=cap)
    wait_until_running(state_dir, job.id)
    log = Path(job.log_path)
    wait_for(lambda: step_of(last_line(log)) == lines - 1, "the job's last line")
    wait_for(lambda: log.stat().st_size <= cap, "the log to be cut under its cap")

    data = log.read_bytes()
    assert data.count(MARK) == 1
    assert b"step 0 loss" in data  # the beginning
    assert f"step {lines - 1} loss".encode() in data  # the newest line
    assert b"step 10000 loss" not in data  # from the middle: cut
    # The supervisor notes the cut in the store just after it makes it: wait for the note
    # before asking `gputop jobs` (asked first, on a loaded machine it came before the note).
    cut = wait_for_job(state_dir, job.id, lambda j: j.log_cut, "the note that the log was cut")
    assert main(["jobs"]) == 0
    assert "(log cut)" in capsys.readouterr().out
    assert main(["jobs", "log", str(job.id)]) == 0
    assert "bytes of output left out here" in capsys.readouterr().out
    assert str(job_cells(cut, "step 1", 0.0)[-1]) == "(log cut) step 1"  # the dashboard's panel


def test_a_log_stops_taking_space_when_free_space_is_low_and_the_job_runs_on(
    small_state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_LOG_FLOOR", "2M")
    job = wait_until_running(small_state_dir, launch(small_state_dir, chatty()).id)
    log = Path(job.log_path)
    disk_in_lines = 4 * 1024 * 1024 // 100

    def written_past_the_disk() -> bool:
        return step_of(last_line(log)) > 3 * disk_in_lines and MARK in log.read_bytes()

    wait_for(written_past_the_disk, "the job to write three disks' worth, logged", 60)
    assert process_alive(job.pid or 0, job.pid_start_time)
    assert log.read_bytes().startswith(b"[gputop]")  # its beginning is kept
