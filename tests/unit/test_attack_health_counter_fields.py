"""``gputop report --health`` with one health counter out of range in the store (found by
attacking it: a store changed by hand, or another gputop's): one counter of a row that was
text, negative or past 2^62 left the card's whole row out, so a real rise of its
uncorrectable ECC errors beside it went unsaid ("1 row(s) ... left out"). A counter out of
range is now not known, that counter alone, counted as ``unknown_counters``; the row's
others are read. The recorder writes the store (helpers/history.py); docs/health.md."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.history import record_stepped
from helpers.scenarios import minimal_gpu

from gputop.cli.main import main

WINDOW = ("--since", "2025-12-31", "--until", "2026-01-02")
WriteScenario = Callable[..., str]


@pytest.mark.parametrize("bad", ["'x'", "-5", "1e400", "X'00ff'", "9223372036854775807"])
def test_one_counter_out_of_range_hides_no_other_rise(
    bad: str,
    tmp_path: Path,
    scenario_file: WriteScenario,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = tmp_path / "history.sqlite3"
    record_stepped(scenario_file([minimal_gpu(ecc_uncorrected_volatile=0)]), store, samples=2)
    record_stepped(
        scenario_file([minimal_gpu(ecc_uncorrected_volatile=3)]), store, samples=2, start_s=60
    )
    connection = sqlite3.connect(store)
    connection.execute(f"UPDATE health_counters SET pcie_replays = {bad}")  # every row's
    connection.commit()
    connection.close()
    assert main(["report", "--health", "--json", "--db", str(store), *WINDOW]) == 0
    document = json.loads(capsys.readouterr().out)
    (rise,) = document["counters"]
    assert rise["rise"]["ecc_uncorrected_volatile"] == 3
    assert rise["first"]["pcie_replays"] is None and rise["last"]["pcie_replays"] is None
    assert document["skipped_rows"] == 0 and document["unknown_counters"] == 2
    assert main(["report", "--health", "--db", str(store), *WINDOW]) == 0
    out = capsys.readouterr().out
    assert "ecc_uncorrected_volatile: 0 -> 3 (+3)" in out
    assert "2 counter value(s) of the store were out of range" in out
