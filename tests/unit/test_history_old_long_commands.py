"""A history store written before commands were kept to ``MAX_COMMAND_CHARS`` holds them
whole: 2 MB for a process started with a command line of megabytes (Linux takes about 2 MB).
Reading such a store read each whole for every span of the process (only to see whether it
was a display server), held it in every report row and printed it whole ('report --by
process', its JSON and CSV, the Xids of --health). It is now cut where it is read, no
rewrite of the store: the first ``READ_COMMAND_CHARS`` read, redacted where the store is
shared, shown to ``MAX_COMMAND_CHARS`` ending in an ellipsis, as the recorder keeps one now."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from helpers.history import process
from helpers.scenarios import minimal_gpu

from gputop.core.history.health_report import build_health_report
from gputop.core.history.report import ReportBy, ReportQuery, build_report
from gputop.core.history.store import open_for_recording
from gputop.core.history.writer import HistoryWriter
from gputop.core.redact import MAX_COMMAND_CHARS, READ_COMMAND_CHARS, CommandForm, kept_text

OLD = 4300020
SHORT = 4300021
PROCESSES = 12
"""Processes of 2 MB commands, each its own (a store's strings are never rolled up)."""
TWO_MB = 2 * 1024 * 1024


def _old_command(n: int) -> str:
    """A command of 2 MB as an older recorder kept it, a secret past the first 4 KB."""
    return (
        f"python x{n}.py "
        + " ".join(["/zqzqzqzq/zqzqzqzq"] * 100)
        + " --token s3cr3t "
        + ("/zq" * (TWO_MB // 3))
    )


def _old_store(tmp_path: Path, samples: int = 40) -> Path:
    """A store recorded now (commands bounded), then given 2 MB commands as an older
    recorder wrote them, and an Xid holding those processes."""
    pids = [OLD + 10 + n for n in range(PROCESSES)]
    listed = [process(pid, "mallory", 1024, 10, "python", f"x{n}.py") for n, pid in enumerate(pids)]
    gpu = minimal_gpu(processes=[*listed, process(SHORT, "alice", 1024, 10, "python", "a.py")])
    scenario = tmp_path / "old.json"
    scenario.write_text(json.dumps({"gpus": [gpu]}))
    store = tmp_path / "history.sqlite3"
    connection = open_for_recording(store, [])
    from gputop.core.sampling.source import open_backend

    backend = open_backend(str(scenario), environ={"GPUTOP_FAKE_TIME": "0"})
    try:
        writer = HistoryWriter(connection, store, print, command_form=None)
        for t in range(samples):
            backend.nvml.set_time(600.0 * t)  # a span each: past the gap a span ends at
            writer.add(backend.sample(), 1.0)
            assert writer.flush()
        with connection:
            for n, pid in enumerate(pids):
                connection.execute(
                    "UPDATE strings SET text = ? WHERE id = "
                    "(SELECT command_id FROM processes WHERE pid = ?)",
                    (_old_command(n), pid),
                )
            connection.execute(
                "INSERT INTO xid_events (id, physical_index, uuid_id, xid, minute, first_t, "
                "last_t, count) VALUES (1, 0, NULL, 79, 1, 60.0, 60.0, 1)"
            )
            connection.execute(
                "INSERT INTO xid_processes SELECT 1, id FROM processes WHERE pid != ?", (SHORT,)
            )
        spans = connection.execute("SELECT COUNT(*) FROM process_spans").fetchone()[0]
        assert spans >= PROCESSES * samples / 2, spans
    finally:
        backend.close()
        connection.close()
    return store


def test_a_report_of_an_old_store_holds_no_command_whole(tmp_path: Path) -> None:
    store = _old_store(tmp_path)
    connection = sqlite3.connect(store)
    try:
        tracemalloc.start()
        rows = build_report(connection, ReportQuery(0.0, 4e9, ReportBy.PROCESS, 1800.0))
        health = build_health_report(connection, 0.0, 4e9)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        connection.close()

    commands = {row.key: row.command for row in rows}
    assert commands[SHORT] == "python a.py"
    for n in range(PROCESSES):
        command = commands[OLD + 10 + n]
        assert command is not None
        # before: 2,099,079 characters, each process's row holding its own
        assert len(command) == MAX_COMMAND_CHARS  # a private store's: the bound, whole
        assert command.startswith(f"python x{n}.py /zqzqzqzq/") and command.endswith("…")
    (event,) = health.events
    assert len(event.processes) == PROCESSES
    assert all(len(p.command or "") <= MAX_COMMAND_CHARS for p in event.processes.values())
    # before: 50 MB at its peak (12 commands of 2 MB held, and one read each span)
    assert peak < 8 * 1024 * 1024, peak


def _report(store: Path, *options: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "COLUMNS": "200"}
    environ.pop("GPUTOP_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "gputop", "report", "--db", str(store), "--since", "1970-01-01",
         "--until", "2100-01-01", *options],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    "options",
    [("--by", "process"), ("--by", "process", "--json"), ("--by", "process", "--csv"),
     ("--health",), ("--health", "--json")],
    ids=["table", "json", "csv", "health", "health-json"],
)  # fmt: skip
def test_gputop_report_prints_no_megabytes_from_an_old_store(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    store = _old_store(tmp_path, samples=3)

    done = _report(store, *options)

    assert done.returncode == 0, done.stderr[-2000:]
    # before: 25 MB printed (each of the 12 commands whole; the health table names none)
    assert len(done.stdout) < PROCESSES * (MAX_COMMAND_CHARS + 1000), len(done.stdout)
    assert "x3.py" in done.stdout


def test_a_shared_old_store_is_redacted_before_the_cut(tmp_path: Path) -> None:
    store = _old_store(tmp_path, samples=3)
    store.chmod(0o644)  # another user may read it: its commands are redacted on read

    done = _report(store, "--by", "process", "--json")

    assert done.returncode == 0, done.stderr[-2000:]
    assert "s3cr3t" not in done.stdout
    assert len(done.stdout) < PROCESSES * (MAX_COMMAND_CHARS + 1000)


@pytest.mark.parametrize("form", [None, "redacted", "name"])
def test_a_text_read_back_is_within_the_bound(form: CommandForm | None) -> None:
    secret_at_the_cut = "a " * ((READ_COMMAND_CHARS - 10) // 2) + "--password=hunter2xyz" * 3
    for text in (
        "python train.py",
        "x" * (TWO_MB),
        " " * TWO_MB,
        "y " * TWO_MB,
        "\U0001f600" * TWO_MB,
        secret_at_the_cut,
        "",
    ):
        shown = kept_text(text[: READ_COMMAND_CHARS + 1], form)  # as the store's reader reads
        assert shown is not None
        assert len(shown) <= MAX_COMMAND_CHARS
        if form is not None:
            assert "hunter" not in shown
        if len(text) > READ_COMMAND_CHARS and form != "name":
            assert shown.endswith("…")
    for value in (None, 3, b"x" * 10, 2.5):
        assert kept_text(value, form) is None
    assert kept_text("python train.py --lr 0.1", None) == "python train.py --lr 0.1"
