"""What a damaged job store holds is kept, however hostile what it holds (docs/sqlite.md).

Real stores on disk with real damage (one leaf page of a table overwritten, found through
SQLite's ``dbstat``): the remembered commands of the launch dialog damaged mid-table, job
ids far beyond the ids tried one by one, and the time salvage takes when a damaged page
makes the highest id look absurd.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest
from helpers.jobs import asked_job, run_cli

from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_file import REBUILT_NOTE
from gputop.core.jobs.store_rows import ended
from gputop.core.sqlite_files import readable_rows

PAGE = 4096


def _job(store: JobStore, n: int) -> int:
    job = store.create_job(
        asked_job(
            name=f"job-{n}", command=["python", f"train{n}.py"], env={"PAD": f"{n:04d}" * 200}
        )
    )
    store.record(job.id, ended(exit_code=n % 3))
    return job.id


def _checkpoint(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def _damage_leaf_of(path: Path, table: str) -> None:
    """Overwrite the middle leaf page of ``table`` (not its first nor its last)."""
    connection = sqlite3.connect(path)
    pages = [
        row[0]
        for row in connection.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY path",
            (table,),
        )
    ]
    connection.close()
    assert len(pages) >= 3, pages
    page = pages[len(pages) // 2]
    with open(path, "r+b") as handle:
        handle.seek((page - 1) * PAGE)
        handle.write(bytes(range(256)) * (PAGE // 256))


def test_remembered_commands_damaged_mid_table_lose_no_job(tmp_path: Path) -> None:
    """Before, the commands read before the damage were taken for row ids (``int`` of a
    command's text): a ValueError after the store was moved aside, every job forgotten."""
    state_dir = tmp_path / "state"
    with JobStore.open(state_dir) as store:
        ids = [_job(store, n) for n in range(20)]
        for n in range(600):
            store.add_history(f"python train.py --seed {n} " + "x" * 200)
    path = state_dir / "jobs.sqlite3"
    _checkpoint(path)
    _damage_leaf_of(path, "history")

    with JobStore.open(state_dir, repair=True) as store:
        (notice,) = store.notices
        jobs = store.list_jobs()
        history = store.history(limit=1000)
    assert "20 jobs read back from it" in notice, notice
    assert [job.id for job in jobs] == ids and not [j for j in jobs if j.note == REBUILT_NOTE]
    assert len(history) >= 600 - 20  # a 4 KiB page holds at most ~17 of these commands
    assert list(state_dir.glob("jobs.sqlite3.corrupt-*"))


def test_ids_beyond_those_tried_one_by_one_are_kept(tmp_path: Path) -> None:
    """A job whose id is beyond MAX_SALVAGE_IDS (or not positive) and that SQLite still
    returns is kept as it was, not rebuilt from its log as '(not known)'."""
    state_dir = tmp_path / "state"
    with JobStore.open(state_dir) as store:
        ids = [_job(store, n) for n in range(200)]
        connection = store._conn
        connection.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'jobs'", (2**62,))
        far = _job(store, 1000)
        connection.execute(
            "INSERT INTO jobs SELECT -7, name, command, command_text, uses_shell, cwd, "
            "physical_indices, uuids, env, mode, state, log_path, created_at, started_at, "
            "ended_at, pid, pid_start_time, supervisor_pid, supervisor_start_time, exit_code, "
            "signal, note, host, grace_s, wait_for_free, wait_count, wait_min_free_mib, "
            "wait_max_util_percent, stop_requested, boot_id, session_id, "
            "supervisor_session_id, token, slurm_job_id, usage, pid_start_ticks, "
            "supervisor_start_ticks FROM jobs WHERE id = 1"
        )
    assert far == 2**62 + 1
    path = state_dir / "jobs.sqlite3"
    _checkpoint(path)
    _damage_leaf_of(path, "jobs")

    with JobStore.open(state_dir, repair=True) as store:
        jobs = {job.id: job for job in store.list_jobs()}
    assert jobs[far].name == "job-1000" and jobs[far].note != REBUILT_NOTE
    assert jobs[-7].name == "job-0"
    assert len([i for i in ids if i in jobs]) >= 200 - 10


def test_salvage_time_is_bounded_when_ids_look_absurd(tmp_path: Path) -> None:
    """Rows 1 to 49, then 2**62, and a table that cannot be read in one pass: before,
    every id up to a million was looked up one by one (under the open lock that every
    other gputop waits on), and the row at 2**62 was never reached."""
    connection = sqlite3.connect(tmp_path / "s.sqlite3")
    connection.row_factory = sqlite3.Row
    connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT)")
    connection.executemany("INSERT INTO t VALUES (?, ?)", [(n, "x" * 10) for n in range(1, 50)])
    connection.execute("INSERT INTO t VALUES (?, 'far')", (2**62,))
    connection.commit()
    started = time.monotonic()
    rows = readable_rows(_FailingAt(connection, 20), "t")  # type: ignore[arg-type]
    took = time.monotonic() - started
    assert [row["id"] for row in rows] == [*range(1, 20), *range(21, 50), 2**62]
    assert rows[-1]["x"] == "far"
    assert took < 1.0, f"{took:.1f} s"


@pytest.mark.parametrize(
    ("ids", "bad"),
    [
        # rows 110 and 111 sound, between two damaged places a few ids apart
        ([*range(1, 200)], {*range(100, 110), *range(112, 128)}),
        # the same far beyond the ids looked up one by one (found by doubling)
        ([*range(1, 110), *range(10_000, 10_051)], {*range(100, 110), *range(10_000, 10_010)}),
        ([*range(1, 110), *range(10_000, 10_051)], {*range(100, 110), *range(10_012, 10_031)}),
        (
            [*range(1, 110), *range(10_000, 10_051)],
            {*range(100, 110), *range(10_000, 10_010), *range(10_012, 10_031)},
        ),
    ],
    ids=["near", "far", "far-after", "far-island"],
)
def test_sound_rows_between_damaged_places_are_kept(
    tmp_path: Path, ids: list[int], bad: set[int]
) -> None:
    """Damaged places close together, as on the pages of a torn write: the sound rows
    between them are read too, not only those after the last."""
    connection = sqlite3.connect(tmp_path / "s.sqlite3")
    connection.row_factory = sqlite3.Row
    connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT)")
    connection.executemany("INSERT INTO t VALUES (?, 'x')", [(n,) for n in ids])
    connection.commit()
    started = time.monotonic()
    rows = readable_rows(_FailingAt(connection, bad), "t")  # type: ignore[arg-type]
    assert [row["id"] for row in rows] == [n for n in ids if n not in bad]
    assert time.monotonic() - started < 5.0


class _FailingAt:
    """A connection whose rows ``bad`` cannot be read, as on damaged pages: a read that
    reaches one fails, and so does a lookup that lands among them (a page's ids)."""

    def __init__(self, connection: sqlite3.Connection, bad: int | set[int]) -> None:
        self._connection = connection
        self._bad = {bad} if isinstance(bad, int) else bad

    def execute(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        if "rowid >= ?" in sql and "LIMIT 1" in sql and params[0] in self._bad:
            raise sqlite3.DatabaseError("database disk image is malformed")
        cursor = self._connection.execute(sql, params)
        return _Cursor(cursor, self._bad)


class _Cursor:
    def __init__(self, cursor: sqlite3.Cursor, bad: set[int]) -> None:
        self._cursor = cursor
        self._bad = bad
        self.description = cursor.description

    def __iter__(self):  # type: ignore[no-untyped-def]
        for row in self._cursor:
            if row[0] in self._bad:
                raise sqlite3.DatabaseError("database disk image is malformed")
            yield row

    def fetchone(self):  # type: ignore[no-untyped-def]
        return next(iter(self), None)


@pytest.mark.parametrize("name", ["99999999999999999999.log", "9223372036854775807.log", "².log"])
def test_a_stray_log_name_never_stops_a_store_being_created(tmp_path: Path, name: str) -> None:
    """New ids continue after the logs' ids, as far as an id can go: before, a log named
    with 20 digits ended in an OverflowError (a traceback), one named 2**63-1 made every
    launch fail as 'database or disk is full', and '².log' in a ValueError."""
    state_dir = tmp_path / "state"
    (state_dir / "logs").mkdir(parents=True, mode=0o700)
    state_dir.chmod(0o700)
    (state_dir / "logs" / name).touch()
    with JobStore.open(state_dir, repair=True) as store:
        assert _job(store, 1) >= 1
        assert store.faults.fault is None


def test_rows_that_make_no_job_are_left_out_and_the_rest_kept(tmp_path: Path) -> None:
    """Rows SQLite still returns but whose values make no job (a command nested 100,000
    deep, a state no gputop writes, a blob for a name) are left out, one by one: before,
    the nesting raised a RecursionError after the store was moved aside, and every job was
    forgotten."""
    state_dir = tmp_path / "state"
    with JobStore.open(state_dir) as store:
        ids = [_job(store, n) for n in range(200)]
        connection = store._conn
        connection.execute(
            "UPDATE jobs SET command = ? WHERE id = 3", ("[" * 100_000 + "]" * 100_000,)
        )
        connection.execute("UPDATE jobs SET state = 'bogus' WHERE id = 4")
        connection.execute("UPDATE jobs SET usage = ? WHERE id = 5", (b"\xff\x00",))
    path = state_dir / "jobs.sqlite3"
    _checkpoint(path)
    _damage_leaf_of(path, "jobs")

    with JobStore.open(state_dir, repair=True) as store:
        (notice,) = store.notices
        jobs = {job.id: job for job in store.list_jobs()}
    assert "moved aside" in notice
    assert jobs[3].note == REBUILT_NOTE and jobs[4].note == REBUILT_NOTE  # from their logs
    assert len([i for i in ids if i in jobs and jobs[i].note != REBUILT_NOTE]) >= 200 - 12


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("command", "[" * 100_000 + "]" * 100_000),
        ("state", "bogus\x1b[2J"),
        ("env", "{"),
        # JSON, but no environment: 'gputop jobs --json' ended in "internal error: TypeError:
        # 'int' object is not iterable" (exit 70), and a supervisor would have met a number
        # where a variable's text belongs
        ("env", "-1"),
        ("env", '{"CUDA_VISIBLE_DEVICES": 1}'),
        # a NUL in a path (a blob written by hand): 'gputop jobs' and 'jobs --json' ended in
        # "internal error: ValueError: embedded null byte" when the log was opened
        ("log_path", b"\xff\x00"),
        ("cwd", "/tmp\x00x"),
        # another kind, or a number no clock reaches, in a plain column: internal errors of
        # 'jobs' (OverflowError: timestamp out of range; TypeError: 'str' object cannot be
        # interpreted as an integer), 'jobs --json' (bytes are not JSON serializable) and
        # 'jobs wait' (unsupported operand type(s) for +: 'int' and 'str')
        ("started_at", 9e999),
        ("ended_at", "x"),
        ("created_at", b"\xff"),
        ("note", b"\xff\x00"),
        ("signal", "[[["),
        ("signal", 9e999),
        ("host", b"\xff"),
        # a signal no OS has: 'jobs wait' exited 127 for -1 (128 + -1), 128 for 0, and 0 for
        # 128 (a status of 256); 'jobs' showed 'killed (signal -1)'
        ("signal", -1),
        ("signal", 0),
        ("signal", 128),
        ("signal", 2**63 - 1),
        # no process has such a pid: 'jobs stop' of a running job ended in "internal error:
        # OverflowError: signed integer is greater than maximum" (2**40), or ValueError (-1)
        ("pid", 2**40),
        ("pid", -1),
        ("supervisor_pid", 0),
    ],
    ids=[
        *("nested", "state", "env", "env-number", "env-value-number", "log-nul", "cwd-nul"),
        *("started-inf", "ended-text", "created-blob", "note-blob", "signal-text"),
        *("signal-inf", "host-blob", "signal-minus-1", "signal-0", "signal-128", "signal-huge"),
        *("pid-huge", "pid-minus-1", "supervisor-pid-0"),
    ],
)
def test_a_row_changed_by_hand_is_named_never_an_internal_error(
    tmp_path: Path, column: str, value: str
) -> None:
    state_dir = tmp_path / "state"
    with JobStore.open(state_dir) as store:
        _job(store, 1)
        store._conn.execute(f"UPDATE jobs SET {column} = ? WHERE id = 1", (value,))
    for argv in (["jobs"], ["jobs", "--json"], ["jobs", "wait", "1", "--timeout", "1"]):
        result = run_cli(*argv, env={**os.environ, "GPUTOP_STATE_DIR": str(state_dir)}, timeout=60)
        assert result.returncode == 1, result.stderr
        assert "holds a row for job 1 that no gputop wrote" in result.stderr
        assert "internal error" not in result.stderr and "\x1b" not in result.stderr


def test_a_running_job_with_a_pid_no_process_has_is_named_by_jobs_stop(tmp_path: Path) -> None:
    """Before: 'internal error: OverflowError: signed integer is greater than maximum'."""
    state_dir = tmp_path / "state"
    with JobStore.open(state_dir) as store:
        job = store.create_job(asked_job(name="x", command=["true"]))
        store._conn.execute(
            "UPDATE jobs SET state = 'running', pid = ?, pid_start_time = 1.0, started_at = 1.0 "
            "WHERE id = ?",
            (2**40, job.id),
        )
    env = {**os.environ, "GPUTOP_STATE_DIR": str(state_dir)}
    result = run_cli("jobs", "stop", str(job.id), "--yes", env=env, timeout=60)
    assert result.returncode == 1, result.stderr
    assert f"holds a row for job {job.id} that no gputop wrote" in result.stderr


def test_a_salvage_that_fails_puts_the_damaged_store_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while what a damaged store holds is carried over: the damaged store
    goes back where it was, untouched, and the next recording command carries it all.
    Before, the new store (its schema committed, no job in it) stayed, read as sound, and
    every job was forgotten, after an internal error."""
    from gputop.core.jobs import store_file
    from gputop.core.jobs.store import StoreError

    state_dir = tmp_path / "state"
    with JobStore.open(state_dir) as store:
        ids = [_job(store, n) for n in range(200)]
    path = state_dir / "jobs.sqlite3"
    _checkpoint(path)
    _damage_leaf_of(path, "jobs")
    damaged = path.read_bytes()

    def full(*args: object) -> int:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store_file, "_rebuild_from_logs", full)
    with pytest.raises(StoreError, match="put back as it was") as error:
        JobStore.open(state_dir, repair=True)
    assert error.value.fault is not None
    assert path.read_bytes() == damaged
    assert not list(state_dir.glob("jobs.sqlite3.corrupt-*"))
    monkeypatch.undo()
    with JobStore.open(state_dir, repair=True) as store:
        (notice,) = store.notices
        jobs = {job.id for job in store.list_jobs()}
    assert "moved aside" in notice and jobs == set(ids)
