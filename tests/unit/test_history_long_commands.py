"""Another user's process whose command line is megabytes long (Linux takes 128 KiB an
argument, about 2 MB in all). The recorder kept each distinct command whole: 2 MB of the
history store for ever (its strings are never rolled up) and of the recorder's memory (up to
10,000 kept), so a user starting such processes filled the recorder's disk. A command is now
kept to ``MAX_COMMAND_CHARS``, redacted before the cut in a store others read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.history import process
from helpers.scenarios import minimal_gpu

from gputop.core.history.report import ReportBy, ReportQuery, build_report
from gputop.core.history.store import open_for_recording
from gputop.core.history.writer import HistoryWriter
from gputop.core.redact import MAX_COMMAND_CHARS, CommandForm
from gputop.core.sampling.source import open_backend

PATH_WORD = "/" + "/".join(["zqzqzqzq"] * 13_000)
"""A word the redactor keeps (a path), of 117,000 characters: one argument Linux takes."""
LONG = 4300010
SHORT = 4300011
SHORT_COMMAND = ("python", "train.py", "--lr", "0.1")


@pytest.mark.parametrize("form", [None, "redacted", "name"], ids=["private", "shared", "name"])
def test_a_command_of_megabytes_is_kept_to_the_bound(
    tmp_path: Path, form: CommandForm | None
) -> None:
    long_process = process(LONG, "mallory", 1024, 10, "python", "x.py", *(PATH_WORD,) * 16)
    gpu = minimal_gpu(processes=[long_process, process(SHORT, "alice", 1024, 10, *SHORT_COMMAND)])
    scenario = tmp_path / "long.json"
    scenario.write_text(json.dumps({"gpus": [gpu]}))
    store = tmp_path / "state" / "history.sqlite3"
    connection = open_for_recording(store, [])
    backend = open_backend(str(scenario), environ={"GPUTOP_FAKE_TIME": "0"})
    try:
        writer = HistoryWriter(connection, store, print, command_form=form)
        for t in range(3):
            backend.nvml.set_time(5.0 * t)
            writer.add(backend.sample(), 1.0)
            assert writer.flush()
        longest = connection.execute("SELECT MAX(LENGTH(text)) FROM strings").fetchone()[0]
        rows = {
            row.key: row
            for row in build_report(connection, ReportQuery(0.0, 4e9, ReportBy.PROCESS, 1800.0))
        }
    finally:
        backend.close()
        connection.close()

    # before: 1,872,015 characters in the store
    assert longest <= MAX_COMMAND_CHARS
    command = rows[LONG].command
    assert command is not None
    if form == "name":
        assert command == "python"
    else:
        assert command.startswith("python x.py /zqzqzqzq/") and command.endswith("…")
    assert rows[SHORT].command == ("python" if form == "name" else " ".join(SHORT_COMMAND))
    assert store.stat().st_size < 1024 * 1024
