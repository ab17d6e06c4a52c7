"""``gputop report`` on a history store whose rows another user changed by hand with sqlite3:
a value no recorder writes is that row's problem, never an internal error."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers.history import record_stepped

from gputop.cli.main import main

WHOLE = ("--since", "2000-01-01", "--until", "2100-01-01")


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("demo") / "history.sqlite3"
    record_stepped("demo", store, samples=12)
    return store


def edited(demo_store: Path, tmp_path: Path, statement: str) -> Path:
    store = tmp_path / "history.sqlite3"
    store.write_bytes(demo_store.read_bytes())
    store.chmod(0o600)
    connection = sqlite3.connect(store)
    with connection:
        connection.execute(statement)
    connection.close()
    return store


@pytest.mark.parametrize(
    "bad_pid",
    ["'x'", "x'00ff'", "9e999", "-9e999", "7.5", "-1", "0", "4294967296"],
    ids=["text", "blob", "inf", "-inf", "fraction", "negative", "zero", "past-pid_t"],
)
def test_a_hand_edited_pid_is_no_internal_error_by_process(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], bad_pid: str
) -> None:
    """A process's pid set to text, a blob or infinity ended 'report --by process' in an
    internal error (int() of it); one no process has (0, -1, 2**32, 7.5) was shown as its
    pid. The row is still reported (its GPU time is real), its pid '?'."""
    store = edited(demo_store, tmp_path, f"UPDATE processes SET pid = {bad_pid}")
    code = main(["report", "--db", str(store), *WHOLE, "--by", "process"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = captured.out.splitlines()[2:]
    assert rows and all(row.split()[row.startswith("!")] == "?" for row in rows)
    code = main(["report", "--db", str(store), *WHOLE, "--by", "process", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    document = json.loads(captured.out)
    assert document["rows"] and {row["key"] for row in document["rows"]} == {"?"}


def test_a_hand_edited_job_that_is_a_blob_is_no_internal_error_by_job(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A process's job set to a blob (a number is stored as text in its TEXT column) ended
    'report --by job --json' in an internal error (TypeError: Object of type bytes is not
    JSON serializable), and the table showed it as "b'\\x00\\xff'". Such a job is '?', its
    GPU time still reported."""
    store = edited(demo_store, tmp_path, "UPDATE processes SET job = x'00ff'")
    code = main(["report", "--db", str(store), *WHOLE, "--by", "job", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    document = json.loads(captured.out)
    assert document["rows"] and {row["key"] for row in document["rows"]} == {"?"}
    code = main(["report", "--db", str(store), *WHOLE, "--by", "job"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.splitlines()[2].split()[0] in ("?", "!")


@pytest.mark.parametrize("by", ["user", "process"])
def test_one_huge_holder_name_does_not_widen_every_row(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], by: str
) -> None:
    """A user name of 200,000 characters (a hand-edited store; a hostile Prometheus's label
    is the same for 'report --prometheus') padded every row of the table to its width: 500
    holders became 100 MB of text. It is still shown whole, in its own row only."""
    huge = "A" * 200_000
    store = edited(demo_store, tmp_path, f"UPDATE strings SET text = '{huge}' WHERE text = 'alice'")
    code = main(["report", "--db", str(store), *WHOLE, "--by", by])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = captured.out.splitlines()
    named = [line for line in lines if huge in line]  # alice's rows (two processes by process)
    assert named and all(len(line) < len(huge) + 1_000 for line in named)
    others = [line for line in lines[1:] if huge not in line]
    assert len(others) >= 3 and all(len(line) < 2_000 for line in others)


@pytest.mark.parametrize("bad_time", ["'x'", "x'00ff'", "9e999"], ids=["text", "blob", "infinite"])
def test_a_hand_edited_xid_time_does_not_stop_the_recorder(tmp_path: Path, bad_time: str) -> None:
    """An Xid row's last time set to text by hand ended the recorder's first sample of its
    next run in an internal error (ValueError: could not convert string to float), so
    'gputop record' recorded nothing more; an infinite one left out every Xid the card
    held at that start. Such a time marks nothing as recorded."""
    store = tmp_path / "history.sqlite3"
    record_stepped("faulty", store, samples=8, start_s=20.0)
    connection = sqlite3.connect(store)
    with connection:
        codes = {row[0] for row in connection.execute("SELECT xid FROM xid_events")}
        # the row no longer says which Xid it was: the card's are to be recorded again
        connection.execute(f"UPDATE xid_events SET last_t = {bad_time}, xid = 99999")
    connection.close()
    assert codes
    record_stepped("faulty", store, samples=4, start_s=60.0)
    connection = sqlite3.connect(store)
    again = {row[0] for row in connection.execute("SELECT xid FROM xid_events")}
    connection.close()
    assert codes <= again
