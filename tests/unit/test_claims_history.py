"""Claims in the history store and ``gputop report`` (docs/claims.md): claimed GPU time per
user and how much of it the cards sat idle, recorded by the real recorder into real SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers.history import make_version_1, record_stepped

from gputop.cli.main import main
from gputop.core.claims.book import Card, ClaimBook
from gputop.core.history.claim_spans import claimed_time
from gputop.core.history.schema import SCHEMA_VERSION

GPU1 = "GPU-96870f72-ff47-4de2-1bb0-99f7d8338c12"
INTERVAL_S = 5.0


def claim_as_root(directory: Path, cards: list[Card]) -> None:
    book = ClaimBook.open({"GPUTOP_CLAIMS_DIR": str(directory)})
    assert book is not None
    with book:
        book.claim(cards, 3600)


def idle_seconds(store: Path, indices: tuple[int, ...]) -> tuple[float, float]:
    """(claimed, idle) seconds as the recorded GPU samples of these cards say."""
    connection = sqlite3.connect(store)
    try:
        marks = ",".join("?" * len(indices))
        claimed, idle = connection.execute(
            "SELECT SUM(s.duration_s), SUM(CASE WHEN g.utilization_gpu_percent < 5 "
            "THEN s.duration_s ELSE 0 END) FROM samples s JOIN gpu_samples g "
            f"ON g.sample_id = s.id WHERE g.physical_index IN ({marks})",
            indices,
        ).fetchone()
    finally:
        connection.close()
    return claimed, idle


GPU2 = "GPU-f892c819-e030-1568-a2c9-521972500816"


def test_report_counts_claimed_and_claimed_but_idle_time_per_user(
    claims_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GPU 1 (busy) and GPU 2 (idle) claimed by root through ten recorded minutes."""
    claim_as_root(claims_dir, [Card(GPU1, 1, "GPU 1"), Card(GPU2, 2, "GPU 2")])
    store = tmp_path / "history.sqlite3"
    record_stepped("v100x4", store, samples=121, interval_s=INTERVAL_S)
    claimed, idle = idle_seconds(store, (1, 2))
    assert claimed == pytest.approx(2 * 600, abs=2 * INTERVAL_S)
    assert 0 < idle < claimed  # GPU 2 sat idle, GPU 1 did not

    code = main(["report", "--db", str(store), "--since", "2000-01-01", "--json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert document["claims"] == [
        {
            "user": "root",
            "claimed_seconds": pytest.approx(claimed),
            "idle_seconds": pytest.approx(idle),
        }
    ]
    assert main(["report", "--db", str(store), "--since", "2000-01-01"]) == 0
    table = capsys.readouterr().out
    assert "Claimed GPU time per user (idle: utilisation under 5 %)" in table
    assert table.rstrip().splitlines()[-1].split()[0] == "root"

    connection = sqlite3.connect(store)
    try:
        (first,) = connection.execute("SELECT MIN(t) FROM samples").fetchone()
        (rows,) = connection.execute("SELECT COUNT(*) FROM claim_spans").fetchone()
        half = claimed_time(connection, first, first + 300)
    finally:
        connection.close()
    assert rows == 2  # a row per user and card for these ten minutes, not one per sample
    assert half[0].claimed_s == pytest.approx(claimed / 2, abs=2 * INTERVAL_S)


def test_a_store_without_claims_reports_none(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "old.sqlite3")
    try:
        connection.execute("CREATE TABLE strings (id INTEGER PRIMARY KEY, text TEXT)")
        assert claimed_time(connection, 0, 1e10) == []
        connection.executescript(
            "CREATE TABLE claim_spans (id INTEGER PRIMARY KEY, user_id INTEGER, uuid_id "
            "INTEGER, physical_index INTEGER, start_t REAL, end_t REAL, claimed_s REAL, "
            "idle_s REAL);"
            "INSERT INTO claim_spans VALUES (1, 1, NULL, 0, 10, 20, 1e400, 5);"
            "INSERT INTO claim_spans VALUES (2, 1, NULL, 0, 10, 20, 10, 11);"
            "INSERT INTO claim_spans VALUES (3, 1, NULL, 0, 30, 20, 10, 1);"
            "INSERT INTO claim_spans VALUES (4, 1, NULL, 0, 10, 20, 'x', 1);"
        )
        assert claimed_time(connection, 0, 1e10) == []  # damaged rows invent no time
    finally:
        connection.close()


def test_a_store_of_version_1_is_brought_up_to_date_keeping_its_rows(tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite3"
    record_stepped("v100x4", store, samples=3)
    make_version_1(store)
    connection = sqlite3.connect(store)
    try:
        (before,) = connection.execute("SELECT COUNT(*) FROM samples").fetchone()
    finally:
        connection.close()
    record_stepped("v100x4", store, samples=3, start_s=60)
    connection = sqlite3.connect(store)
    try:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == before + 3
        assert connection.execute("SELECT COUNT(*) FROM claim_spans").fetchone()[0] == 0
    finally:
        connection.close()


def test_the_report_asks_for_a_store_of_version_1_to_be_brought_up_to_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Version 2 added the activity columns the report reads: a version 1 store is brought
    up to date by the recorder (the next `gputop record`), then read with its claims."""
    store = tmp_path / "history.sqlite3"
    record_stepped("v100x4", store, samples=3)
    make_version_1(store)
    assert main(["report", "--db", str(store), "--since", "2000-01-01", "--json"]) == 1
    assert "run 'gputop record' once" in capsys.readouterr().err
    record_stepped("v100x4", store, samples=3, start_s=60)
    assert main(["report", "--db", str(store), "--since", "2000-01-01", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["claims"] == [] and document["rows"]
