"""The history of health (issue 42): the recorder keeps every Xid with the processes on the
card then (a storm coalesced, counted exactly) and the health counters when they change;
``gputop report --health`` reads them back; an older store is migrated."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from helpers.history import make_version_2, record_stepped
from helpers.history_health import (
    EPOCH,
    STORM_PID,
    WriteScenario,
    open_fake,
    record_storm,
    storm_scenario,
    write,
)
from helpers.scenarios import minimal_gpu
from helpers.waiting import wait_for

from gputop.cli.main import main
from gputop.core.fake import resolve_scenario_path
from gputop.core.history import store as store_module
from gputop.core.history.retention import Retention, apply_retention
from gputop.core.history.schema import SCHEMA_VERSION
from gputop.core.history.store import HistoryError, open_for_reading, open_for_recording
from gputop.core.history.writer import HistoryWriter
from gputop.core.model import Snapshot

WINDOW = ("--since", "2025-12-31", "--until", "2026-01-02")


def xid_rows(store: Path) -> list[tuple[int, int, int]]:
    connection = sqlite3.connect(store)
    try:
        return connection.execute(
            "SELECT physical_index, xid, SUM(count) FROM xid_events "
            "GROUP BY physical_index, xid ORDER BY physical_index, xid"
        ).fetchall()
    finally:
        connection.close()


def test_the_recorder_keeps_the_faulty_cards_xids_with_the_processes_on_them(
    tmp_path: Path,
) -> None:
    store = tmp_path / "history.sqlite3"
    nvml, backend = open_fake(resolve_scenario_path("faulty"), at_s=4.0)
    writer = HistoryWriter(open_for_recording(store, []), store, print)
    try:
        first = backend.sample()
        a40_pids = sorted(p.pid for p in first.gpus[2].processes)
        assert a40_pids
        write(writer, first)
        nvml.set_time(6.0)

        def lost_with_79() -> Snapshot | None:
            snapshot = backend.sample()
            health = snapshot.gpus[2].health
            return (
                snapshot
                if snapshot.gpus[2].lost and health and 79 in dict(health.xid_counts)
                else None
            )

        write(writer, wait_for(lost_with_79, "the A40 lost, with its Xid 79"))
    finally:
        backend.close()
        assert writer.connection is not None
        writer.connection.close()
    # the P100's 63, the A40's 48 and the 79 that came with its loss, each once
    assert xid_rows(store) == [(1, 63, 1), (2, 48, 1), (2, 79, 1)]
    connection = sqlite3.connect(store)
    try:
        on_79 = connection.execute(
            "SELECT r.pid FROM xid_events e JOIN xid_processes x ON x.event_id = e.id "
            "JOIN processes r ON r.id = x.process_id WHERE e.xid = 79 ORDER BY r.pid"
        ).fetchall()
        counters = connection.execute(
            "SELECT physical_index, ecc_uncorrected_volatile, remapped_pending "
            "FROM health_counters WHERE physical_index = 2"
        ).fetchall()
    finally:
        connection.close()
    # a lost card lists no processes: those of its last sample were on it
    assert [pid for (pid,) in on_79] == a40_pids
    assert counters == [(2, 2, 1)]  # written once: the counters did not change


def test_a_storm_is_counted_exactly_in_a_bounded_number_of_rows(
    tmp_path: Path, scenario_file: WriteScenario
) -> None:
    store = tmp_path / "history.sqlite3"
    expected = record_storm(scenario_file, store)
    assert xid_rows(store) == [(0, 13, expected[13]), (0, 31, expected[31])]
    connection = sqlite3.connect(store)
    try:
        rows = connection.execute(
            "SELECT xid, minute, count FROM xid_events ORDER BY xid, minute"
        ).fetchall()
        pids = connection.execute(
            "SELECT DISTINCT r.pid FROM xid_processes x JOIN processes r ON r.id = x.process_id"
        ).fetchall()
    finally:
        connection.close()
    # samples at 30 s to 210 s: minutes 0 to 3, one row each for 13, one for 31
    minute = int(EPOCH // 60)
    assert [(xid, m - minute) for xid, m, _ in rows] == [
        (13, 0),
        (13, 1),
        (13, 2),
        (13, 3),
        (31, 2),
    ]
    assert pids == [(STORM_PID,)]


def test_report_health_shows_a_storm_as_one_line_with_its_count(
    tmp_path: Path, scenario_file: WriteScenario, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "history.sqlite3"
    expected = record_storm(scenario_file, store)
    assert main(["report", "--health", "--db", str(store), *WINDOW]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines())
    storm = [line for line in out.splitlines() if " 13 " in line and "graphics engine" in line]
    assert len(storm) == 1 and f" {expected[13]} " in storm[0]
    assert f"{STORM_PID} mallory python bad_kernel.py" in out
    assert main(["report", "--health", "--json", "--db", str(store), *WINDOW]) == 0
    document = json.loads(capsys.readouterr().out, parse_constant=pytest.fail)
    by_xid = {event["xid"]: event for event in document["events"]}
    assert by_xid[13]["count"] == expected[13] and by_xid[31]["count"] == 40
    assert by_xid[13]["gpu"] == 0 and by_xid[13]["uuid"] == minimal_gpu()["uuid"]
    # when gputop received the storm's first Xid: the sampler started at 30 s
    assert by_xid[13]["time"] == EPOCH + 30
    assert by_xid[13]["meaning"].startswith("A program on the GPU did something illegal")
    assert by_xid[13]["processes"] == [
        {"pid": STORM_PID, "user": "mallory", "command": "python bad_kernel.py", "job": None}
    ]
    assert document["counters"] == []  # nothing rose


def test_report_health_lists_the_cards_whose_counters_rose(
    tmp_path: Path, scenario_file: WriteScenario, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "history.sqlite3"
    record_stepped(scenario_file([minimal_gpu(ecc_uncorrected_volatile=0)]), store, samples=2)
    later = minimal_gpu(
        ecc_uncorrected_volatile=3, name="NVIDIA A100-SXM4-40GB\x1b[2J\x1b]0;owned\x07"
    )
    record_stepped(scenario_file([later]), store, samples=2, start_s=60)
    assert main(["report", "--health", "--json", "--db", str(store), *WINDOW]) == 0
    document = json.loads(capsys.readouterr().out)
    (rise,) = document["counters"]
    assert rise["gpu"] == 0 and rise["rise"] == {
        "ecc_uncorrected_volatile": 3,
        "ecc_uncorrected_aggregate": 3,
    }
    assert rise["first"]["ecc_uncorrected_volatile"] == 0
    assert rise["last"]["ecc_uncorrected_volatile"] == 3
    assert rise["first_time"] < rise["last_time"]
    assert main(["report", "--health", "--db", str(store), *WINDOW]) == 0
    out = capsys.readouterr().out
    assert "No Xid was recorded in this window." in out
    assert "ecc_uncorrected_volatile: 0 -> 3 (+3)" in out


def test_an_untrusted_uuid_and_command_are_sanitised_in_the_text(
    tmp_path: Path, scenario_file: WriteScenario, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "history.sqlite3"
    record_storm(scenario_file, store)
    connection = sqlite3.connect(store)
    connection.execute("UPDATE strings SET text = 'GPU-\x1b]0;owned\x07' WHERE text LIKE 'GPU-%'")
    connection.execute("UPDATE strings SET text = 'python \x1b[2Jx.py' WHERE text LIKE 'python%'")
    connection.execute("UPDATE health_counters SET pcie_replays = pcie_replays + 1")
    connection.execute(
        "INSERT INTO health_counters (t, physical_index, uuid_id, pcie_replays) "
        "SELECT t + 1, physical_index, uuid_id, 9 FROM health_counters"
    )
    connection.commit()
    connection.close()
    assert main(["report", "--health", "--db", str(store), *WINDOW]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "pcie_replays: 1 -> 9 (+8)" in out


def test_a_row_out_of_range_is_left_out_and_said(
    tmp_path: Path, scenario_file: WriteScenario, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "history.sqlite3"
    record_storm(scenario_file, store)
    connection = sqlite3.connect(store)
    connection.execute("UPDATE xid_events SET count = -5 WHERE xid = 31")
    connection.commit()
    connection.close()
    assert main(["report", "--health", "--json", "--db", str(store), *WINDOW]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [event["xid"] for event in document["events"]] == [13]
    assert document["skipped_rows"] == 1


def test_a_version_2_store_is_migrated_keeping_its_rows_and_then_records_xids(
    tmp_path: Path, scenario_file: WriteScenario, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "history.sqlite3"
    record_stepped("v100x4", store, samples=3)
    make_version_2(store)
    connection = sqlite3.connect(store)
    (before,) = connection.execute("SELECT COUNT(*) FROM samples").fetchone()
    connection.close()
    # the report reads a version 2 store; --health asks for it to be brought up to date
    assert main(["report", "--db", str(store), "--since", "2000-01-01", "--json"]) == 0
    capsys.readouterr()
    assert main(["report", "--health", "--db", str(store), *WINDOW]) == 1
    err = capsys.readouterr().err
    assert "run 'gputop record' once" in err and "Traceback" not in err
    record_storm(scenario_file, store)
    connection = sqlite3.connect(store)
    try:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
        assert connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0] > before
        assert connection.execute("SELECT SUM(count) FROM xid_events").fetchone()[0] > 10000
    finally:
        connection.close()
    assert main(["report", "--health", "--db", str(store), *WINDOW]) == 0


def test_a_store_this_version_wrote_is_refused_by_an_older_gputop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "history.sqlite3"
    open_for_recording(store, []).close()
    older = dataclasses.replace(store_module.HISTORY, version=2)  # a gputop of version 2
    monkeypatch.setattr(store_module, "HISTORY", older)
    with pytest.raises(HistoryError, match=r"written by a newer gputop \(store version 3"):
        open_for_reading(store)
    with pytest.raises(HistoryError, match=r"written by a newer gputop \(store version 3"):
        open_for_recording(store, [])


def test_gputop_record_fake_faulty_keeps_the_xids_that_report_health_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command itself, its Xid thread and sampler on the scenario's clock (run 5 times
    faster): the A40's 79 at 4.9 s and its loss at 5 s are 15 scenario seconds before the
    last sample."""
    monkeypatch.setenv("GPUTOP_FAKE_SPEED", "5")
    store = tmp_path / "history.sqlite3"
    argv = ["record", "--fake", "faulty", "--db", str(store), "--interval", "1", "--count", "20"]
    assert main(argv) == 0
    assert xid_rows(store) == [(1, 63, 1), (2, 48, 1), (2, 79, 1)]
    capsys.readouterr()
    assert main(["report", "--health", "--json", "--db", str(store), "--until", "2100-01-01"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(e["gpu"], e["xid"], e["count"]) for e in document["events"]] == [
        (1, 63, 1),
        (2, 48, 1),
        (2, 79, 1),
    ]
    assert {p["user"] for p in document["events"][2]["processes"]} == {"ivan"}


def test_xids_and_counters_go_after_the_year_the_hourly_samples_keep(
    tmp_path: Path, scenario_file: WriteScenario
) -> None:
    store = tmp_path / "history.sqlite3"
    record_storm(scenario_file, store)
    connection = open_for_recording(store, [])
    try:
        apply_retention(connection, EPOCH + 100 * 86400, Retention())
        kept = connection.execute("SELECT COUNT(*) FROM xid_events").fetchone()[0]
        # kept with the processes they name, whose spans were merged meanwhile
        named = connection.execute(
            "SELECT COUNT(*) FROM xid_processes x JOIN processes r ON r.id = x.process_id"
        ).fetchone()[0]
        assert kept == 5 and named == 5
        apply_retention(connection, EPOCH + 400 * 86400, Retention())
        for table in ("xid_events", "xid_processes", "health_counters", "processes"):
            assert connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0
    finally:
        connection.close()


@pytest.mark.parametrize(
    "extra", [["--csv"], ["--plot"], ["--by", "gpu"], ["--prometheus", "http://127.0.0.1:9"]]
)
def test_report_health_with_an_option_it_does_not_take_is_a_usage_error(
    tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "history.sqlite3"
    open_for_recording(store, []).close()
    assert main(["report", "--health", "--db", str(store), *extra]) == 2
    err = capsys.readouterr().err
    assert "--health" in err and "Traceback" not in err


def test_a_batch_that_fails_after_its_xids_were_written_is_written_again_counted_once(
    tmp_path: Path, scenario_file: WriteScenario
) -> None:
    """The first sample of the batch writes its Xid rows, the second is refused: the whole
    batch is rolled back and written again later, each Xid counted once."""
    store = tmp_path / "history.sqlite3"
    nvml, backend = open_fake(storm_scenario(scenario_file), at_s=30.0)
    connection = open_for_recording(store, [])
    told: list[str] = []
    writer = HistoryWriter(connection, store, told.append)

    def counted(total: int) -> Snapshot | None:
        snapshot = backend.sample()
        health = snapshot.gpus[0].health
        return snapshot if health and dict(health.xid_counts) == {13: total} else None

    try:
        write(writer, wait_for(lambda: counted(10000), "the storm counted"))
        connection.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON samples WHEN NEW.t > "
            f"{EPOCH + 75} BEGIN SELECT RAISE(ABORT, 'no'); END"
        )
        nvml.set_time(60.0)
        nvml.inject_xid(0, 13, count=5000)
        writer.add(wait_for(lambda: counted(15000), "5000 more"), 5.0)
        nvml.set_time(90.0)
        nvml.inject_xid(0, 13, count=7)
        writer.add(wait_for(lambda: counted(15007), "7 more"), 5.0)
        assert not writer.flush()
        assert not writer.flush()
        connection.execute("DROP TRIGGER refuse")
        assert writer.flush()
    finally:
        backend.close()
        connection.close()
    assert xid_rows(store) == [(0, 13, 15007)]
    assert told[-1] == f"The history store {store} can be written again."
