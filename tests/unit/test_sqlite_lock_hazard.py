"""No code path that opens a store drops SQLite's locks in its own process (docs/sqlite.md).

POSIX advisory locks belong to a process and an inode: closing *any* descriptor of the
database file, or of its ``-shm``, drops every lock the process holds on it, SQLite's
included. Before this was fixed, the dashboard opened a second job store (a launch, a stop,
the history of commands) beside the sampler's, each open checked the files by opening and
closing them, and the sampler's read locks vanished: a supervisor's checkpoint then ran under
a reader that believed it was protected, and the store was found "malformed" and moved aside
with every job in it.

Here a connection of this process holds a read transaction; every way gputop opens the job
store and the history store runs in this same process; then ``/proc/locks`` must still show
every lock this process held, and a writer in another process must still be unable to
checkpoint past the reader (``PRAGMA wal_checkpoint(TRUNCATE)`` reports it busy).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.core.history.store import open_for_reading, open_for_recording
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_file import open_read_only

WRITER = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=5, isolation_level=None)
for i in range(50):
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(sys.argv[2], (i,))
    conn.execute("COMMIT")
# a TRUNCATE checkpoint waits out the busy timeout for the readers: a reader that holds its
# locks keeps it busy however long it waits, so it need not wait the 5 s
conn.execute("PRAGMA busy_timeout = 200")
busy, log, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
print(busy, log, done)
"""


def _my_locks(*stores: Path) -> list[str]:
    """This process's entries in /proc/locks (type, inode) on ``stores`` and their ``-wal``
    and ``-shm``, in a stable order. Only these: a thread of an earlier test in this worker
    (a dashboard's sampler on its way out) may hold and drop locks on stores of its own."""
    inodes = {
        str(os.stat(f"{store}{suffix}").st_ino)
        for store in stores
        for suffix in ("", "-wal", "-shm")
        if os.path.exists(f"{store}{suffix}")
    }
    mine = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        # "1: POSIX  ADVISORY  READ 1234 fd:01:5678 128 128" (a "->" marks a waiter)
        if "->" in fields:
            continue
        if (
            fields[1] == "POSIX"
            and fields[4] == str(os.getpid())
            and fields[5].rsplit(":", 1)[-1] in inodes
        ):
            mine.append(" ".join(fields[1:4] + fields[5:]))
    return sorted(mine)


def _checkpoint_from_another_process(path: Path, insert: str) -> tuple[int, int, int]:
    result = subprocess.run(
        [sys.executable, "-c", WRITER, str(path), insert],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    busy, log, done = (int(x) for x in result.stdout.split())
    return busy, log, done


def _open_every_way_jobs(state_dir: Path) -> None:
    for _ in range(3):
        JobStore.open(state_dir).close()
        store = JobStore.open_existing(state_dir)
        assert store is not None
        store.list_jobs()
        store.close()
        open_read_only(state_dir).close()


def test_opening_the_job_store_keeps_this_process_locks(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    with JobStore.open(state_dir) as holder:
        holder.add_history("echo one")
    # A JobStore open in this process would be shared by every open below: the reader is
    # a connection of its own, so that each open really checks and connects.
    reader = sqlite3.connect(state_dir / "jobs.sqlite3", isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT COUNT(*) FROM history").fetchone()[0] == 1
        store = state_dir / "jobs.sqlite3"
        before = _my_locks(store)
        assert before, "a reader in WAL mode holds locks on the store and its -shm"

        _open_every_way_jobs(state_dir)

        assert _my_locks(store) == before
        busy, _log, _done = _checkpoint_from_another_process(
            state_dir / "jobs.sqlite3",
            "INSERT INTO history (command_text, seq, used_at) VALUES ('x' || ?, 1000, 0)",
        )
        assert busy == 1, "the reader's snapshot must hold the checkpoint back"
        # and the reader still sees its own snapshot, whole
        assert reader.execute("SELECT COUNT(*) FROM history").fetchone()[0] == 1
        assert reader.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        reader.execute("COMMIT")
        reader.close()


def test_opening_the_history_store_keeps_this_process_locks(tmp_path: Path) -> None:
    path = tmp_path / "hist" / "history.sqlite3"
    path.parent.mkdir(mode=0o700)
    notices: list[str] = []
    recorder = open_for_recording(path, notices)
    recorder.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER)")
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        before = _my_locks(path)
        assert before
        for _ in range(3):
            open_for_recording(path, notices).close()
            open_for_reading(path).close()
        assert _my_locks(path) == before
        busy, _log, _done = _checkpoint_from_another_process(
            path, "INSERT INTO probe (n) VALUES (?)"
        )
        assert busy == 1
    finally:
        reader.execute("COMMIT")
        reader.close()
        recorder.close()
    assert not notices


@pytest.mark.parametrize("companion", ["-wal", "-shm"])
def test_the_checks_still_refuse_a_planted_link(tmp_path: Path, companion: str) -> None:
    """Checking without opening still refuses what it refused before."""
    state_dir = tmp_path / "state"
    JobStore.open(state_dir).close()
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    link = state_dir / f"jobs.sqlite3{companion}"
    if link.exists():
        link.unlink()
    link.symlink_to(target)
    from gputop.core.private_files import StoreError

    with pytest.raises(StoreError, match="symbolic link"):
        JobStore.open(state_dir)


def test_every_command_and_reader_in_process_keeps_this_process_locks(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The paths beyond opening: launching, listing, waiting, stopping, the dashboard's
    service, the lab agent's reads, kept ends, the log tails, and every reader of the
    history store (report, card and process history, the sparklines' start), all in the
    process of a reader holding a transaction on both stores."""
    from helpers.history import holders_scenario, record_stepped

    from gputop.cli.main import main
    from gputop.core.history.card_history import read_card_history
    from gputop.core.history.process_history import read_process_history
    from gputop.core.history.recent import stored_utilization
    from gputop.core.jobs.service import JobsService, LogTails
    from gputop.core.jobs.unrecorded import RecordedEnd, keep_end, read_pending_ends
    from gputop.core.remote.agent import read_jobs_from_store

    history = tmp_path / "hist" / "history.sqlite3"
    history.parent.mkdir(mode=0o700)
    last = record_stepped(holders_scenario(tmp_path / "s.json"), history, 40)
    with JobStore.open(state_dir) as holder:
        holder.add_history("echo one")
    readers = []
    for path in (state_dir / "jobs.sqlite3", history):
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        readers.append(reader)
    try:
        stores = (state_dir / "jobs.sqlite3", history)
        before = _my_locks(*stores)
        assert len({line.split()[-3] for line in before}) >= 2  # on both stores

        assert main(["run", "--fake", "v100x4", "--gpus", "0", "--", "true"]) == 0
        assert main(["run", "--fake", "v100x4", "--gpus", "1", "--", "sleep", "60"]) == 0
        assert main(["jobs", "wait", "1"]) == 0
        assert main(["jobs", "--json"]) == 0
        assert main(["jobs", "stop", "2", "--yes"]) == 0
        service = JobsService(state_dir, user="me", cwd="/", job_environ={}, report=print)
        view = service.read_now(None)
        assert view is not None and service.history()
        jobs, problem = read_jobs_from_store()()
        assert problem is None and jobs is not None and len(jobs) == 2
        with JobStore.open(state_dir) as store:
            LogTails().last_lines(store.list_jobs())
        keep_end(state_dir, RecordedEnd(job_id=1, ended_at=1.8e9, exit_code=0))
        assert read_pending_ends(state_dir)
        assert main(["report", "--db", str(history), "--since", "1h"]) in (0, 1)
        now = last.timestamp
        assert read_card_history(history, 0, 3600.0, now, 60).problem is None
        assert read_process_history(history, 1, None, 3600.0, now, 60).problem is None
        stored_utilization(history, now, 60)
        capsys.readouterr()

        assert _my_locks(*stores) == before
        for path, insert in (
            (
                state_dir / "jobs.sqlite3",
                "INSERT INTO history (command_text, seq, used_at) VALUES ('x' || ?, 1000, 0)",
            ),
            (history, "INSERT INTO strings (text) VALUES ('probe ' || ?)"),
        ):
            busy, _log, _done = _checkpoint_from_another_process(path, insert)
            assert busy == 1, path
    finally:
        for reader in readers:
            reader.execute("COMMIT")
            reader.close()
