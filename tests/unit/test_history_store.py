"""The history store: write failures reported once and retried, roll-ups that keep the
figures, readers that refuse links, and the simulated clock that runs faster."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest
from helpers.history import BOB_NOTEBOOK, GIB_MIB, MIB, holders_scenario, record_stepped

from gputop.core.errors import UsageError
from gputop.core.history.lock import RecorderLock
from gputop.core.history.report import ReportBy, ReportQuery, build_report
from gputop.core.history.retention import Retention, apply_retention
from gputop.core.history.store import HistoryError, open_for_reading, open_for_recording
from gputop.core.history.writer import HistoryWriter
from gputop.core.sampling.source import open_backend


@pytest.fixture
def scenario(tmp_path: Path) -> str:
    return holders_scenario(tmp_path / "holders.json")


def test_a_full_store_is_reported_once_and_its_samples_written_when_space_returns(
    tmp_path: Path, scenario: str
) -> None:
    store = tmp_path / "state" / "history.sqlite3"
    connection = open_for_recording(store, [])
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "0"})
    told: list[str] = []
    writer = HistoryWriter(connection, store, told.append)
    try:
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk full"
        results = []
        for t in range(200):  # the pages the empty tables have fill up first
            backend.nvml.set_time(float(t))
            writer.add(backend.sample(), 1.0)
            results.append(writer.flush())
        failed_from = results.index(False)
        assert not any(results[failed_from:])
        assert writer.pending == 200 - failed_from
        assert told == [
            f"Cannot write the history store {store}: the disk (or your quota) holding it is "
            "full. gputop keeps sampling, keeps the samples in memory (the oldest are dropped "
            "beyond 720) and writes them when the store can be written again."
        ]
        connection.execute("PRAGMA max_page_count = 1073741823")
        assert writer.flush()
        assert told[1:] == [f"The history store {store} can be written again."]
        assert connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 200
    finally:
        backend.close()
        connection.close()


def test_a_read_only_store_is_named_as_such(tmp_path: Path, scenario: str) -> None:
    store = tmp_path / "state" / "history.sqlite3"
    connection = open_for_recording(store, [])
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "0"})
    told: list[str] = []
    writer = HistoryWriter(connection, store, told.append)
    try:
        connection.execute("PRAGMA query_only = ON")
        writer.add(backend.sample(), 1.0)
        assert not writer.flush()
        assert not writer.flush()
        assert len(told) == 1
        assert f"history store {store}: it is on a read-only file system" in told[0]
        assert writer.pending == 1
    finally:
        backend.close()
        connection.close()


def test_roll_ups_keep_each_holders_time_peak_and_idle_in_one_span_a_day(
    tmp_path: Path, scenario: str
) -> None:
    store = tmp_path / "state" / "history.sqlite3"
    last = record_stepped(scenario, store, samples=720)  # an hour of 5-second samples
    connection = open_for_recording(store, [])
    query = ReportQuery(0.0, 4e9, ReportBy.PROCESS, 1800.0)
    try:
        before = {row.key: row for row in build_report(connection, query)}
        apply_retention(connection, last.timestamp + 10 * 60, Retention(full_s=60.0))
        resolutions = connection.execute("SELECT DISTINCT resolution_s FROM samples").fetchall()
        spans = connection.execute(
            "SELECT COUNT(*), MIN(resolution_s) FROM process_spans"
        ).fetchone()
        after = {row.key: row for row in build_report(connection, query)}
    finally:
        connection.close()
    assert (60,) in resolutions
    assert spans == (5, 86400)  # one span a process for the hour (all on 2026-01-01)
    assert set(after) == set(before)
    for key, row in before.items():
        assert after[key].gpu_seconds == pytest.approx(row.gpu_seconds)
        assert after[key].peak_memory_bytes == row.peak_memory_bytes
        assert after[key].mean_sm_util == pytest.approx(row.mean_sm_util)
    assert after[BOB_NOTEBOOK].idle_held_seconds == pytest.approx(3600, abs=60)


def test_a_recorder_merging_every_10_minutes_keeps_one_span_a_process_and_day(
    tmp_path: Path, scenario: str
) -> None:
    """The recorder rolls up every 10 minutes of store time: what ended since the last time
    must join the day's merged span, or a month of 15-minute spans stays (ten times the spans,
    and a report ten times slower)."""
    merged_store = tmp_path / "merged" / "history.sqlite3"
    plain_store = tmp_path / "plain" / "history.sqlite3"
    record_stepped(scenario, merged_store, samples=720, retention=Retention(full_s=60.0))
    record_stepped(scenario, plain_store, samples=720)
    query = ReportQuery(0.0, 4e9, ReportBy.PROCESS, 1800.0)
    merged, plain = open_for_recording(merged_store, []), open_for_recording(plain_store, [])
    try:
        by_resolution = dict(
            merged.execute(
                "SELECT resolution_s, COUNT(*) FROM process_spans GROUP BY resolution_s"
            ).fetchall()
        )
        pairs = merged.execute(
            "SELECT COUNT(DISTINCT process_id || '/' || physical_index) FROM process_spans"
        ).fetchone()[0]
        after = {row.key: row for row in build_report(merged, query)}
        before = {row.key: row for row in build_report(plain, query)}
    finally:
        merged.close()
        plain.close()
    assert pairs == 5
    assert by_resolution[86400] == pairs  # the hour (all on 2026-01-01): one span a pair
    assert by_resolution.get(0, 0) <= pairs  # and what the last 10 minutes had not merged
    assert set(after) == set(before)
    for key, row in before.items():
        assert after[key].gpu_seconds == pytest.approx(row.gpu_seconds)
        assert after[key].peak_memory_bytes == row.peak_memory_bytes
        assert after[key].mean_sm_util == pytest.approx(row.mean_sm_util)
        assert after[key].idle_held_seconds == pytest.approx(row.idle_held_seconds)
    assert after[BOB_NOTEBOOK].idle_held_seconds == pytest.approx(3600, abs=60)


def test_minutes_roll_up_to_hours_and_old_hours_are_deleted(tmp_path: Path, scenario: str) -> None:
    store = tmp_path / "state" / "history.sqlite3"
    last = record_stepped(scenario, store, samples=720)
    connection = open_for_recording(store, [])
    retention = Retention(full_s=60.0, minute_s=120.0, hour_s=86400.0)
    try:
        apply_retention(connection, last.timestamp + 3 * 3600, retention)
        assert connection.execute("SELECT DISTINCT resolution_s FROM samples").fetchall() == [
            (3600,)
        ]
        query = ReportQuery(0.0, 4e9, ReportBy.USER, 1800.0)
        rows = {row.key: row for row in build_report(connection, query)}
        assert rows["bob"].gpu_seconds == pytest.approx(3600, abs=5)
        assert rows["bob"].peak_memory_bytes == 10 * GIB_MIB * MIB
        apply_retention(connection, last.timestamp + 2 * 86400, retention)
        assert connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 0
        assert connection.execute("SELECT COUNT(*) FROM processes").fetchone()[0] == 0
    finally:
        connection.close()


def test_a_reader_refuses_a_link_to_a_store(tmp_path: Path, scenario: str) -> None:
    store = tmp_path / "state" / "history.sqlite3"
    record_stepped(scenario, store, samples=1)
    link = tmp_path / "link.sqlite3"
    link.symlink_to(store)
    with pytest.raises(HistoryError, match="never through a link"):
        open_for_reading(link)


def test_a_trigger_someone_planted_is_refused_and_never_run(tmp_path: Path, scenario: str) -> None:
    store = tmp_path / "state" / "history.sqlite3"
    record_stepped(scenario, store, samples=1)
    planted = sqlite3.connect(store)
    planted.execute("CREATE TRIGGER t AFTER INSERT ON samples BEGIN DELETE FROM strings; END")
    planted.commit()
    planted.close()
    with pytest.raises(HistoryError, match="trigger 't', which gputop never creates"):
        open_for_recording(store, [])


def test_the_simulated_clock_runs_as_many_times_faster_as_asked() -> None:
    backend = open_backend("demo", environ={"GPUTOP_FAKE_SPEED": "1000"})
    try:
        started = time.monotonic()
        first = backend.sample().timestamp
        while backend.sample().timestamp - first < 300:  # five simulated minutes
            assert time.monotonic() - started < 30, "the simulated clock runs at real speed"
        real_s = time.monotonic() - started
        simulated_s = backend.sample().timestamp - first
        assert simulated_s <= (time.monotonic() - started) * 1000 + 1
        assert real_s < 300
    finally:
        backend.close()


@pytest.mark.parametrize("value", ["0.5", "fast", "nan", "inf", "١٠"])
def test_a_bad_fake_speed_is_refused_with_an_example(value: str) -> None:
    with pytest.raises(UsageError, match=r"GPUTOP_FAKE_SPEED=.* is not a speed: .*\(e\.g\. 600"):
        open_backend("demo", environ={"GPUTOP_FAKE_SPEED": value})


def test_without_a_speed_the_simulated_clock_keeps_real_time() -> None:
    backend = open_backend("demo", environ={})
    try:
        assert abs(backend.sample().timestamp - time.time()) < 5
    finally:
        backend.close()
    assert os.environ.get("GPUTOP_FAKE_SPEED") is None


def test_samples_taken_before_an_unexpected_error_are_written(
    tmp_path: Path, scenario: str
) -> None:
    import threading

    from helpers.history import SteppedClock

    from gputop.core.history.recorder import Recorder, RecorderOptions

    store = tmp_path / "state" / "history.sqlite3"
    connection = open_for_recording(store, [])
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "0"})
    clock = SteppedClock(backend, 5.0)
    taken: list[int] = []

    def sample():  # type: ignore[no-untyped-def]
        if len(taken) == 4:  # inside the first 30-s batch: nothing written yet but one
            raise RuntimeError("the driver went away")
        taken.append(1)
        return clock.sample()

    writer = HistoryWriter(connection, store, print)
    recorder = Recorder(sample, writer, RecorderOptions(speed=1e9), print, clock=lambda: clock.t)
    try:
        with pytest.raises(RuntimeError):
            recorder.run(threading.Event())
        assert connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 4
    finally:
        backend.close()
        connection.close()


def test_retention_limits_out_of_order_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gputop.cli.main import main

    code = main(
        [
            "record",
            "--db",
            str(tmp_path / "h.sqlite3"),
            "--keep-full",
            "30d",
            "--keep-minutes",
            "2d",
        ]
    )
    assert code == 2
    assert "Give --keep-full no longer than --keep-minutes" in capsys.readouterr().err
    assert not (tmp_path / "h.sqlite3").exists()


def test_a_linked_store_directory_is_refused_naming_the_history_store(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "state"
    link.symlink_to(real)
    with pytest.raises(HistoryError, match=f"The history store directory {link} is a symbolic"):
        open_for_recording(link / "history.sqlite3", [])
    with pytest.raises(HistoryError, match=f"The history store directory {link} is a symbolic"):
        RecorderLock(link / "history.sqlite3").acquire()
    assert list(real.iterdir()) == []


def test_another_write_failure_is_said_once_and_its_end_once(tmp_path: Path, scenario: str) -> None:
    store = tmp_path / "state" / "history.sqlite3"
    connection = open_for_recording(store, [])
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "0"})
    told: list[str] = []
    writer = HistoryWriter(connection, store, told.append)
    try:
        connection.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON samples BEGIN SELECT RAISE(ABORT, 'no'); END"
        )
        for _ in range(3):
            writer.add(backend.sample(), 1.0)
            assert not writer.flush()
        connection.execute("DROP TRIGGER refuse")
        assert writer.flush()
        assert told == [
            f"Cannot write the history store {store}: no. gputop keeps sampling, keeps the "
            "samples in memory (the oldest are dropped beyond 720) and writes them when the "
            "store can be written again.",
            f"The history store {store} can be written again.",
        ]
        assert connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 3
    finally:
        backend.close()
        connection.close()


@pytest.mark.parametrize("command", ["record", "report"])
def test_a_negative_store_version_is_refused_with_exit_2(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to end in ``KeyError: -5`` (record) or advice to run record (report)."""
    from gputop.cli.main import main

    store = tmp_path / "state" / "history.sqlite3"
    open_for_recording(store, []).close()
    connection = sqlite3.connect(store)
    connection.execute("PRAGMA user_version = -5")
    connection.commit()
    connection.close()
    before = store.read_bytes()
    extra = ["--count", "1", "--fake", "v100x4"] if command == "record" else []
    code = main([command, "--db", str(store), *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "store version -5, which no gputop writes" in err and "Traceback" not in err
    assert store.read_bytes() == before


@pytest.mark.parametrize("command", ["record", "report"])
def test_a_database_gputop_did_not_create_is_refused_as_the_job_store_refuses_it(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Someone's own database given as --db: before, the recorder added its tables to it
    and stamped it a history store (and the report said to run record)."""
    from gputop.cli.main import main

    store = tmp_path / "state" / "history.sqlite3"
    store.parent.mkdir(mode=0o700)
    connection = sqlite3.connect(store)
    connection.execute("CREATE TABLE photos (name TEXT)")
    connection.commit()
    connection.close()
    before = store.read_bytes()
    extra = ["--count", "1", "--fake", "v100x4"] if command == "record" else []
    code = main([command, "--db", str(store), *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "is a database gputop did not create (it holds 'photos')" in err
    assert "Traceback" not in err and store.read_bytes() == before


def test_samples_dropped_while_the_store_cannot_be_written_are_said_and_counted(
    tmp_path: Path, scenario: str
) -> None:
    """Held back long enough (a full disk, a reader pinning the -wal at its bound), the
    oldest samples kept in memory go: said when it starts, and how many when writing works
    again (before: nothing said while the -wal was at its bound)."""
    store = tmp_path / "state" / "history.sqlite3"
    connection = open_for_recording(store, [])
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "0"})
    told: list[str] = []
    writer = HistoryWriter(connection, store, told.append, max_pending=5)
    try:
        connection.execute("PRAGMA query_only = ON")  # nothing can be written for now
        for t in range(12):
            backend.nvml.set_time(float(t))
            writer.add(backend.sample(), 1.0)
            writer.flush()
        assert writer.pending == 5
        dropping = [text for text in told if "dropping" in text.lower()]
        assert len(dropping) == 1 and "5 samples" in dropping[0], told
        connection.execute("PRAGMA query_only = OFF")
        assert writer.flush()
        assert any("7 samples were dropped" in text for text in told), told
        assert connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 5
    finally:
        backend.close()
        connection.close()
