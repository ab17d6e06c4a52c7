"""The history recorder on a full or read-only disk (docs/faults.md): it says so once, keeps
sampling, and writes what it kept once space returns; nothing already written is lost. On
real small file systems (small_filesystems.py): a tmpfs the test mounts and fills, and a
read-only bind mount."""

from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.history import holders_scenario
from helpers.small_filesystems import fill
from helpers.waiting import wait_for

GPUTOP = (sys.executable, "-m", "gputop")
INTERVAL_S = 5.0
EVERY_TIME = ("--since", "2000-01-01", "--until", "2100-01-01")
SPEED = "120"  # a 5-second interval every 42 ms
WAIT_S = 30.0
FULL = "the disk (or your quota) holding it is full"
READ_ONLY = "it is on a read-only file system"
AGAIN = "can be written again."


class RecorderProcess:
    """A real ``gputop record`` on a simulated machine; its stderr goes to a file, read as
    it grows."""

    def __init__(self, scenario: str, store: Path, stderr: Path) -> None:
        self.stderr_path = stderr
        environ = {**os.environ, "GPUTOP_FAKE_SPEED": SPEED}
        environ.pop("GPUTOP_FAKE_TIME", None)  # the clock runs: every sample its own time
        with open(stderr, "wb") as err:
            self.process = subprocess.Popen(
                [*GPUTOP, "record", "--fake", scenario, "--db", str(store), "--interval", "5"],
                env=environ,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_to_say(self, text: str) -> None:
        wait_for(lambda: text in self.stderr or self.process.poll() is not None, repr(text))
        assert text in self.stderr, self.stderr

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=WAIT_S)


@pytest.fixture
def recorders(tmp_path: Path) -> Iterator[list[RecorderProcess]]:
    started: list[RecorderProcess] = []
    yield started
    for recorder in started:
        if recorder.process.poll() is None:
            recorder.process.kill()
            recorder.process.wait()


def start(recorders: list[RecorderProcess], tmp_path: Path, store: Path) -> RecorderProcess:
    scenario = holders_scenario(tmp_path / "holders.json")
    recorder = RecorderProcess(scenario, store, tmp_path / f"recorder{len(recorders)}.err")
    recorders.append(recorder)
    return recorder


def sample_times(store: Path, options: str = "mode=ro") -> list[float]:
    """The samples' times a reader sees now, as written (none before the schema exists)."""
    if not store.exists():
        return []
    connection = sqlite3.connect(f"file:{store}?{options}", uri=True)
    try:
        return [row[0] for row in connection.execute("SELECT t FROM samples ORDER BY id")]
    except sqlite3.OperationalError:  # the schema is being created
        return []
    finally:
        connection.close()


def report(store: Path) -> dict[str, dict[str, float]]:
    """``gputop report --json`` over every recorded time, by user."""
    result = subprocess.run(
        [*GPUTOP, "report", "--db", str(store), "--json", *EVERY_TIME, "--idle-min", "5m"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return {row["key"]: row for row in json.loads(result.stdout)["rows"]}


MAX_GAP_S = 6 * INTERVAL_S
"""The longest gap between two kept samples that is not a loss. At ``SPEED`` an interval is
42 ms of real time, and a recorder that falls behind (a busy machine: another test file runs
beside this one) skips to now rather than bursting (gputop/core/history/recorder.py), so a
250 ms stall leaves a gap of 6 intervals. The disk stays full for about 24 intervals, and
read-only while ``gputop report`` starts and runs (more than 250 ms): a recorder that stopped
sampling, or dropped what it sampled, meanwhile leaves a longer gap."""


def assert_every_sample_kept(times: list[float]) -> None:
    """A sample every interval or so from the first to the last: none was lost."""
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert max(gaps) < MAX_GAP_S, f"a gap of {max(gaps)} s: samples were lost"


def test_a_full_disk_is_said_once_and_the_samples_taken_meanwhile_are_written_when_space_returns(
    small_state_dir: Path, tmp_path: Path, recorders: list[RecorderProcess]
) -> None:
    store = small_state_dir / "history.sqlite3"
    recorder = start(recorders, tmp_path, store)
    wait_for(lambda: len(sample_times(store)) >= 6, "the first batches")
    filler = fill(small_state_dir.parent)
    recorder.wait_to_say(FULL)
    before = sample_times(store)
    # The disk stays full for about 24 sampling intervals (it is not waited on: the
    # recorder goes on sampling whatever this takes).
    time.sleep(1.0)
    assert recorder.process.poll() is None, recorder.stderr
    assert sample_times(store) == before  # nothing could be written
    filler.unlink()
    recorder.wait_to_say(f"{store} {AGAIN}")
    assert recorder.stop() == 0, recorder.stderr

    stderr = recorder.stderr
    assert stderr.count("Cannot write") == 1, stderr
    assert stderr.count(f"{store} {AGAIN}") == 1, stderr
    assert "Traceback" not in stderr
    times = sample_times(store)
    taken = int(stderr.split("stopped after ")[1].split(" sample")[0])
    assert len(times) == taken  # every sample taken is in the store
    assert times[: len(before)] == before  # nothing already written lost
    assert len(times) > len(before) + 12  # the samples taken while the disk was full
    assert_every_sample_kept(times)
    recorded_s = times[-1] - times[0] + INTERVAL_S
    rows = report(store)
    assert rows["bob"]["gpu_seconds"] == pytest.approx(recorded_s, abs=INTERVAL_S)
    assert rows["alice"]["gpu_seconds"] == pytest.approx(2 * recorded_s, abs=2 * INTERVAL_S)


def test_the_report_reads_a_store_on_a_read_only_file_system(
    read_only_view: tuple[Path, Path], tmp_path: Path, recorders: list[RecorderProcess]
) -> None:
    source, view = read_only_view
    recorder = start(recorders, tmp_path, source / "state" / "history.sqlite3")
    wait_for(lambda: len(sample_times(source / "state" / "history.sqlite3")) >= 12, "samples")
    assert recorder.stop() == 0, recorder.stderr
    store = view / "state" / "history.sqlite3"
    # The same file, read where it is writable, creating no -wal or -shm file either.
    times = sample_times(source / "state" / "history.sqlite3", "immutable=1")
    recorded_s = times[-1] - times[0] + INTERVAL_S
    # SQLite reads a WAL store through a -shm file it cannot create here: without the
    # immutable open this said "unable to open database file".
    rows = report(store)
    assert rows["bob"]["gpu_seconds"] == pytest.approx(recorded_s, abs=INTERVAL_S)
    assert sorted(path.name for path in store.parent.iterdir()) == [
        "history.sqlite3",
        "history.sqlite3.lock",
    ]


def test_a_recorder_on_a_read_only_file_system_says_so_once_and_writes_when_it_is_writable(
    read_only_view: tuple[Path, Path], tmp_path: Path, recorders: list[RecorderProcess]
) -> None:
    """A file system cannot be remounted read-only while a file on it is open for writing
    (the kernel says "busy"): the store is recorded first, then the recorder starts on it
    read-only, as after a reboot onto a file system in maintenance."""
    source, view = read_only_view
    first = start(recorders, tmp_path, source / "state" / "history.sqlite3")
    wait_for(lambda: len(sample_times(source / "state" / "history.sqlite3")) >= 12, "samples")
    assert first.stop() == 0, first.stderr
    written = sample_times(source / "state" / "history.sqlite3", "immutable=1")

    store = view / "state" / "history.sqlite3"
    recorder = start(recorders, tmp_path, store)
    recorder.wait_to_say(READ_ONLY)
    rows = report(store)  # the report reads what is there meanwhile
    recorded_s = written[-1] - written[0] + INTERVAL_S
    assert rows["bob"]["gpu_seconds"] == pytest.approx(recorded_s, abs=INTERVAL_S)
    assert recorder.process.poll() is None, recorder.stderr
    made_writable = subprocess.run(
        ["mount", "-o", "remount,bind,rw", str(view)], capture_output=True, text=True, check=False
    )
    assert made_writable.returncode == 0, made_writable.stderr
    recorder.wait_to_say(f"{store} {AGAIN}")
    assert recorder.stop() == 0, recorder.stderr

    stderr = recorder.stderr
    assert stderr.count("Cannot write") == 1, stderr
    assert "Traceback" not in stderr
    taken = int(stderr.split("stopped after ")[1].split(" sample")[0])
    times = sample_times(store)
    assert times[: len(written)] == written  # nothing already written lost
    # Every sample taken while the store was read-only is kept (the simulated clock
    # starts again with each recorder: the two recorders' times overlap).
    assert len(times) == len(written) + taken
    assert_every_sample_kept(times[len(written) :])
