"""A shared history store stays bounded while another user holds a read open.

In WAL mode a reader's open transaction pins the ``-wal``: no checkpoint can pass it and the
file cannot start over. Another user of a store recorded with ``--readable-by all`` could
make it grow without end (3.6 to 21.6 MB in 40 s, and it stayed). Here a real second user
holds a read transaction while a recorder writes at high simulated speed: the recorder says
why once, stops appending at its bound (``GPUTOP_HISTORY_MAX_WAL_MB``, wal_bound.py), and
writes again when the reader lets go (docs/history.md, "A shared store").
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.other_user import OTHER_UID, as_other_user, other_user_python, require_root

HOLD_S = 30
"""At most thirty real seconds at 4000x (33 recorded hours) behind one open transaction: the
reader lets go once the recorder has stopped at its bound and held there ``CAPPED_S``."""
CAPPED_S = 1.0
"""How long the recorder is kept at its bound (at 4000x over an hour of samples) before the
reader lets go."""
STOPPED = "Not writing to the history store"
CAP_MB = 1
SLACK = 512 * 1024
"""What one batch may add after the last check before it (a few pages per card)."""
WAIT_S = 60.0

LET_GO = """
def let_go(release, most_s):  # once the test makes the file ``release``, or after most_s
    deadline = time.monotonic() + float(most_s)
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.02)
"""

HOLD_A_READ = (
    """
import os, sqlite3, sys, time
"""
    + LET_GO
    + """
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, isolation_level=None)
c.execute("BEGIN")
c.execute("SELECT COUNT(*) FROM samples").fetchone()
print("holding", flush=True)
let_go(sys.argv[2], sys.argv[3])
c.execute("COMMIT")
print("released", flush=True)
"""
)


@pytest.fixture
def reachable() -> Iterator[Path]:
    require_root()
    directory = Path(tempfile.mkdtemp(prefix="gputop-wal-bound-", dir="/tmp"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class Said:
    """What a process writes to stderr, read as it comes (a thread), so that the test can
    wait for a line while it runs."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._lines: list[str] = []
        self._thread = threading.Thread(target=self._lines.extend, args=(process.stderr,))
        self._thread.start()

    def __str__(self) -> str:
        return "".join(self._lines)

    def __contains__(self, text: str) -> bool:
        return text in str(self)

    def all(self, timeout_s: float) -> str:
        """Everything, once the process has closed its stderr."""
        self._thread.join(timeout_s)
        return str(self)


def _release_once_capped(said: Said, release: Path, capped_at: list[float]) -> None:
    """Let the holder go once the recorder has said it stopped and ``CAPPED_S`` has passed."""
    if not capped_at and STOPPED in said:
        capped_at.append(time.monotonic())
    if capped_at and time.monotonic() - capped_at[0] >= CAPPED_S:
        release.touch()


def _wal_size(store: Path) -> int:
    try:
        return os.stat(f"{store}-wal").st_size
    except OSError:
        return 0


def test_a_reader_holding_a_transaction_cannot_grow_the_wal_past_its_bound(
    reachable: Path, tmp_path: Path
) -> None:
    found = other_user_python()
    if found is None:
        pytest.skip(f"no Python that uid {OTHER_UID} may execute")
    python, pythonpath = found
    store = reachable / "history" / "history.sqlite3"
    recorder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputop",
            "record",
            "--interval",
            "1",
            "--fake",
            "dgx-h100",
            "--db",
            str(store),
            "--readable-by",
            "all",
        ],
        env={
            **os.environ,
            "GPUTOP_FAKE_SPEED": "4000",
            "GPUTOP_STATE_DIR": str(tmp_path),
            "GPUTOP_HISTORY_MAX_WAL_MB": str(CAP_MB),
        },
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr = Said(recorder)
    release, capped_at = reachable / "release", []
    reader: list[subprocess.CompletedProcess[str]] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while not os.path.exists(f"{store}-shm"):
            assert recorder.poll() is None, stderr.all(WAIT_S)
            assert time.monotonic() < deadline, "the recorder wrote nothing"
            time.sleep(0.05)
        holder = threading.Thread(
            target=lambda: reader.append(
                as_other_user(
                    [python, "-c", HOLD_A_READ, str(store), str(release), str(HOLD_S)],
                    {"PYTHONPATH": pythonpath, "HOME": "/nonexistent"},
                )
            )
        )
        holder.start()
        largest = 0
        reached_cap = False
        while holder.is_alive():
            size = _wal_size(store)
            largest = max(largest, size)
            reached_cap = reached_cap or size >= CAP_MB * 1024 * 1024
            assert recorder.poll() is None
            _release_once_capped(stderr, release, capped_at)
            time.sleep(0.05)  # sampling the file's size while the reader holds on
        holder.join()
        written_after = _wal_size(store)
        deadline = time.monotonic() + WAIT_S
        while _wal_size(store) >= CAP_MB * 1024 * 1024 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        recorder.send_signal(signal.SIGTERM)
        recorder.wait(timeout=WAIT_S)
        said = stderr.all(WAIT_S)
    (held,) = reader
    assert held.returncode == 0 and "released" in held.stdout, held.stderr
    assert reached_cap, f"the -wal never reached its bound (largest {largest} B)"
    assert largest <= CAP_MB * 1024 * 1024 + SLACK, largest
    assert said.count("A reader of the history store") == 1, said
    assert said.count("Not writing to the history store") == 1, said
    assert "under its bound again" in said, said
    assert written_after <= CAP_MB * 1024 * 1024 + SLACK
    assert recorder.returncode in (0, 1), said  # 1: samples dropped beyond the bound, said
    assert "Traceback" not in said


@pytest.mark.parametrize("value", ["0", "65537", "-5", "1.5", "64MB", "nan", "١٢"])
def test_an_absurd_wal_bound_is_refused_exit_2(tmp_path: Path, value: str) -> None:
    """A bound the recorder cannot keep is a usage error, never quietly 64 MiB."""
    result = subprocess.run(
        [sys.executable, "-m", "gputop", "record", "--fake", "v100x4", "--count", "1"],
        env={
            **os.environ,
            "GPUTOP_STATE_DIR": str(tmp_path / "state"),
            "GPUTOP_HISTORY_MAX_WAL_MB": value,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "GPUTOP_HISTORY_MAX_WAL_MB" in result.stderr and "1 to 65536" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "state" / "history.sqlite3").exists()


def test_a_wal_bound_in_range_is_taken(tmp_path: Path) -> None:
    from gputop.core.history.wal_bound import max_wal_bytes

    assert max_wal_bytes({"GPUTOP_HISTORY_MAX_WAL_MB": " 12 "}) == 12 * 1024 * 1024
    assert max_wal_bytes({"GPUTOP_HISTORY_MAX_WAL_MB": ""}) == 64 * 1024 * 1024
    assert max_wal_bytes({}) == 64 * 1024 * 1024


HOLD_THE_CHECKPOINT_LOCK = (
    """
import fcntl, os, sys, time
"""
    + LET_GO
    + """
fd = os.open(sys.argv[1] + "-shm", os.O_RDONLY)
deadline = time.monotonic() + 20
while True:  # the recorder holds this byte itself for the moment of each checkpoint
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 121)  # SQLite's checkpointer lock
        break
    except BlockingIOError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.005)
print("holding", flush=True)
let_go(sys.argv[2], sys.argv[3])
os.close(fd)
print("released", flush=True)
"""
)


def test_a_reader_holding_the_checkpoint_lock_cannot_grow_the_wal_either(
    reachable: Path, tmp_path: Path
) -> None:
    """Another user takes a read lock on the -shm's checkpointer byte (no transaction at
    all): no checkpoint can run, so the -wal grows as under a held read; it stays within
    its bound all the same, the recorder says why, nothing is moved aside, and it writes
    again when the lock goes."""
    found = other_user_python()
    if found is None:
        pytest.skip(f"no Python that uid {OTHER_UID} may execute")
    python, pythonpath = found
    store = reachable / "history" / "history.sqlite3"
    recorder = subprocess.Popen(
        [
            *(sys.executable, "-m", "gputop", "record", "--interval", "1"),
            *("--fake", "dgx-h100", "--db", str(store), "--readable-by", "all"),
        ],
        env={
            **os.environ,
            "GPUTOP_FAKE_SPEED": "2000",
            "GPUTOP_STATE_DIR": str(tmp_path),
            "GPUTOP_HISTORY_MAX_WAL_MB": str(CAP_MB),
        },
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr = Said(recorder)
    release, capped_at = reachable / "release", []
    holder_result: list[subprocess.CompletedProcess[str]] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while not os.path.exists(f"{store}-shm"):
            assert recorder.poll() is None, stderr.all(WAIT_S)
            assert time.monotonic() < deadline, "the recorder wrote nothing"
            time.sleep(0.05)
        holder = threading.Thread(
            target=lambda: holder_result.append(
                as_other_user(
                    [python, "-c", HOLD_THE_CHECKPOINT_LOCK, str(store), str(release), "25"],
                    {"PYTHONPATH": pythonpath, "HOME": "/nonexistent"},
                )
            )
        )
        holder.start()
        largest = 0
        while holder.is_alive():
            largest = max(largest, _wal_size(store))
            assert recorder.poll() is None
            _release_once_capped(stderr, release, capped_at)
            time.sleep(0.05)
        holder.join()
        deadline = time.monotonic() + WAIT_S
        while _wal_size(store) >= CAP_MB * 1024 * 1024 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        recorder.send_signal(signal.SIGTERM)
        recorder.wait(timeout=WAIT_S)
        said = stderr.all(WAIT_S)
    (held,) = holder_result
    assert held.returncode == 0 and "released" in held.stdout, held.stderr
    assert CAP_MB * 1024 * 1024 <= largest <= CAP_MB * 1024 * 1024 + SLACK, largest
    assert said.count("Not writing to the history store") == 1, said
    assert "under its bound again" in said, said
    assert not list(store.parent.glob("*.corrupt-*"))
    assert "Traceback" not in said
