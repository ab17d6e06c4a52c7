"""gputop record as a real process: private files, batches flushed on SIGTERM and SIGINT,
one recorder per store, a SIGKILL that never damages the store (docs/history.md)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.history import holders_scenario
from helpers.waiting import wait_for

SPEED = "120"  # a 5-second interval every 42 ms
WAIT_S = 30.0


@pytest.fixture
def scenario(tmp_path: Path) -> str:
    return holders_scenario(tmp_path / "holders.json")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "state" / "history.sqlite3"


@pytest.fixture
def recorders(scenario: str, store: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gputop",
                "record",
                "--fake",
                scenario,
                "--db",
                str(store),
                *args,
            ],
            env={**os.environ, "GPUTOP_FAKE_SPEED": SPEED},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def samples_in(store: Path) -> int:
    """Samples a reader sees now (0 before the store exists)."""
    if not store.exists():
        return 0
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is being created
        return 0
    finally:
        connection.close()


def stopped_after(stderr: str) -> int:
    match = re.search(r"stopped after (\d+) sample", stderr)
    assert match, stderr
    return int(match.group(1))


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_writes_the_pending_batch_and_exits_0(
    recorders: Callable[..., subprocess.Popen[str]], store: Path, number: int
) -> None:
    recorder = recorders()
    wait_for(lambda: samples_in(store) >= 1, "the first batch")
    recorder.send_signal(number)
    _, stderr = recorder.communicate(timeout=WAIT_S)
    assert recorder.returncode == 0, stderr
    # Batches are written every 30 s of samples: without the flush on stopping, the samples
    # since the last batch would be missing.
    assert samples_in(store) == stopped_after(stderr)
    assert "Traceback" not in stderr


def test_the_store_and_its_lock_are_private(
    recorders: Callable[..., subprocess.Popen[str]], store: Path
) -> None:
    recorder = recorders("--count", "3")
    _, stderr = recorder.communicate(timeout=WAIT_S)
    assert recorder.returncode == 0, stderr
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700
    files = [path for path in store.parent.iterdir() if path.is_file()]
    assert {path.name for path in files} >= {"history.sqlite3", "history.sqlite3.lock"}
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in files)
    assert samples_in(store) == 3


def test_a_second_recorder_on_the_store_names_the_pid_of_the_first(
    recorders: Callable[..., subprocess.Popen[str]], store: Path
) -> None:
    first = recorders()
    wait_for(lambda: samples_in(store) >= 1, "the first recorder")
    second = recorders("--count", "1")
    _, stderr = second.communicate(timeout=WAIT_S)
    assert second.returncode == 1
    assert f"Another recorder (pid {first.pid}) is already recording into {store}" in stderr
    assert first.poll() is None


def test_sigkill_never_damages_the_store_and_a_new_recorder_goes_on(
    recorders: Callable[..., subprocess.Popen[str]], store: Path
) -> None:
    first = recorders("--interval", "1")
    wait_for(lambda: samples_in(store) >= 40, "a few batches")
    first.kill()
    first.communicate(timeout=WAIT_S)
    kept = samples_in(store)
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        connection.close()
    second = recorders("--count", "2")
    _, stderr = second.communicate(timeout=WAIT_S)
    assert second.returncode == 0, stderr
    assert samples_in(store) == kept + 2


def test_a_damaged_store_is_moved_aside_and_a_new_one_started(
    recorders: Callable[..., subprocess.Popen[str]], store: Path
) -> None:
    store.parent.mkdir(mode=0o700)
    store.write_bytes(b"not a database, " * 512)
    store.chmod(0o600)
    recorder = recorders("--count", "1")
    _, stderr = recorder.communicate(timeout=WAIT_S)
    assert recorder.returncode == 0, stderr
    assert "was damaged" in stderr and "moved aside to" in stderr
    aside = [path for path in store.parent.iterdir() if ".corrupt-" in path.name]
    assert len(aside) == 1
    assert aside[0].read_bytes().startswith(b"not a database")
    assert samples_in(store) == 1


def test_a_store_from_a_newer_gputop_is_refused_and_left_untouched(
    recorders: Callable[..., subprocess.Popen[str]], store: Path
) -> None:
    store.parent.mkdir(mode=0o700)
    connection = sqlite3.connect(store)
    connection.execute("PRAGMA user_version = 99")
    connection.execute("CREATE TABLE future (x)")
    connection.commit()
    connection.close()
    store.chmod(0o600)
    before = store.read_bytes()
    recorder = recorders("--count", "1")
    _, stderr = recorder.communicate(timeout=WAIT_S)
    assert recorder.returncode == 1
    assert "was written by a newer gputop (store version 99" in stderr
    report = subprocess.run(
        [sys.executable, "-m", "gputop", "report", "--db", str(store)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert report.returncode == 1
    assert "newer gputop" in report.stderr
    assert store.read_bytes() == before


def test_a_reader_never_blocks_the_recorder_and_the_report_matches_the_recorded_time(
    recorders: Callable[..., subprocess.Popen[str]], store: Path
) -> None:
    recorder = recorders("--count", "72")  # six minutes of 5-second samples
    wait_for(lambda: samples_in(store) >= 1, "the first batch")
    reader = sqlite3.connect(f"file:{store}?mode=ro", uri=True, isolation_level=None)
    reader.execute("BEGIN")
    seen = reader.execute("SELECT COUNT(*) FROM samples").fetchone()[0]  # holds a snapshot
    _, stderr = recorder.communicate(timeout=WAIT_S * 2)
    reader.execute("COMMIT")
    reader.close()
    assert recorder.returncode == 0, stderr
    assert samples_in(store) == 72 > seen
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    first, last, recorded_s = connection.execute(
        "SELECT MIN(t), MAX(t), SUM(duration_s) FROM samples"
    ).fetchone()
    connection.close()
    # What the samples stand for: the time between them, the interval for the first and
    # after a stall past the longest gap (at 120x a 0.25-s stall of a loaded machine is one).
    assert 0.9 * 72 * 5.0 <= recorded_s <= last - first + 5.0 + 1
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputop",
            "report",
            "--db",
            str(store),
            "--json",
            "--since",
            "2000-01-01",
            "--until",
            "2100-01-01",
            "--idle-min",
            "5m",
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert report.returncode == 0, report.stderr
    rows = {row["key"]: row for row in json.loads(report.stdout)["rows"]}
    assert rows["bob"]["gpu_seconds"] == pytest.approx(recorded_s, abs=5.0)
    assert rows["bob"]["idle_held_seconds"] == pytest.approx(recorded_s, abs=5.0)
    assert rows["alice"]["gpu_seconds"] == pytest.approx(2 * recorded_s, abs=10.0)
    assert rows["alice"]["idle_held_seconds"] == 0


@pytest.fixture
def job_processes() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Two live processes of this machine: one in gputop job 7, one that says it is in Slurm
    job 42 (``SLURM_JOB_ID``, which anyone may set; no Slurm says so)."""
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
    started = {
        "gputop:7": subprocess.Popen(sleep, env={**os.environ, "GPUTOP_JOB_ID": "7"}),
        "forged slurm:42": subprocess.Popen(sleep, env={**os.environ, "SLURM_JOB_ID": "42"}),
    }
    yield started
    for process in started.values():
        process.kill()
        process.wait()


def test_the_job_of_a_process_is_recorded_and_reported(
    tmp_path: Path,
    store: Path,
    job_processes: dict[str, subprocess.Popen[bytes]],
    host_pid_namespace: None,
) -> None:
    from helpers.scenarios import minimal_gpu

    processes = [
        {"pid": process.pid, "used_memory_mib": 1024, "sm_util": 50}
        for process in job_processes.values()
    ]
    scenario = tmp_path / "jobs.json"
    scenario.write_text(json.dumps({"gpus": [minimal_gpu(processes=processes)]}))
    record = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputop",
            "record",
            "--fake",
            str(scenario),
            "--db",
            str(store),
            "--count",
            "2",
            "--interval",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert record.returncode == 0, record.stderr
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputop",
            "report",
            "--db",
            str(store),
            "--by",
            "job",
            "--json",
            "--since",
            "1h",
            "--until",
            "2100-01-01",
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert report.returncode == 0, report.stderr
    # The forged Slurm job is no job (it was recorded as slurm:42 on the old code).
    assert {row["key"] for row in json.loads(report.stdout)["rows"]} == {"gputop:7"}


def test_db_in_a_directory_others_may_read_is_refused_and_left_as_it_is(
    tmp_path: Path, scenario: str
) -> None:
    shared = tmp_path / "projects"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    record = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputop",
            "record",
            "--fake",
            scenario,
            "--db",
            str(shared / "history.sqlite3"),
            "--count",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert record.returncode == 2
    assert f"the directory {shared} is open to other users (mode 0755)" in record.stderr
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    assert list(shared.iterdir()) == []
