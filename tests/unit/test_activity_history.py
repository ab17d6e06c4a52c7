"""Activity in the history store and the report, from a recorded hour of known activity.

Card 0, an H100, is held by alice's one process alone: its own SM % says 90, but GPM says
its SMs are 3 % active (stuck in a collective): idle, judged by GPM. Card 1, an H100 with two
processes, is judged by each process's SM % (bob idle, alice not). Card 2, an A100 without
GPM, by carol's own SM %. docs/activity.md; figures within one sample.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers.history import GIB_MIB, make_version_1, process, read_only, record_stepped
from helpers.scenarios import minimal_gpu

from gputop.core.history.report import ReportBy, ReportQuery, ReportRow, build_report
from gputop.core.history.retention import Retention
from gputop.core.history.schema import SCHEMA_VERSION
from gputop.core.history.series import gpu_series
from gputop.core.history.store import open_for_recording

INTERVAL_S = 5.0
HOUR_SAMPLES = 720
HOUR = HOUR_SAMPLES * INTERVAL_S
START_TIME = 1767225600.0
"""Scenario t=0 (docs/scenario.md)."""
H100 = {"name": "NVIDIA H100 80GB HBM3", "cuda_compute_capability": [9, 0]}


def activity_holders(path: Path) -> str:
    gpus = [
        minimal_gpu(**H100, uuid="GPU-11111111-aaaa-bbbb-cccc-000000000000",
                    pci_bus_id="00000000:07:00.0", utilization_gpu=100,
                    activity={"sm_active": 3, "tensor_active": 0, "dram_active": 1},
                    processes=[process(4300001, "alice", 20 * GIB_MIB, 90, "python", "ddp.py")]),
        minimal_gpu(**H100, uuid="GPU-11111111-aaaa-bbbb-cccc-000000000001",
                    pci_bus_id="00000000:08:00.0",
                    activity={"sm_active": 50, "tensor_active": 30, "dram_active": 40},
                    clock_event_reasons=[{"reasons": ["sw_power_cap"], "from_s": 0,
                                          "until_s": 600}],
                    processes=[process(4300002, "alice", 4 * GIB_MIB, 60, "python", "eval.py"),
                               process(4300003, "bob", 10 * GIB_MIB, 0, "jupyter-lab")]),
        minimal_gpu(uuid="GPU-11111111-aaaa-bbbb-cccc-000000000002",
                    pci_bus_id="00000000:09:00.0",
                    processes=[process(4300004, "carol", 2 * GIB_MIB, 2, "python", "c.py")]),
    ]  # fmt: skip
    path.write_text(json.dumps({"driver_version": "550.127.05", "gpus": gpus}))
    return str(path)


@pytest.fixture(scope="module")
def hour_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("activity-history")
    store = directory / "history.db"
    record_stepped(activity_holders(directory / "holders.json"), store, HOUR_SAMPLES)
    return store


def report(store: Path, by: ReportBy) -> dict[str | int, ReportRow]:
    connection = read_only(store)
    try:
        rows = build_report(connection, ReportQuery(0.0, 4e9, by, 1800.0))
    finally:
        connection.close()
    return {row.key: row for row in rows}


def test_the_recorder_stores_each_cards_activity_and_throttling(hour_store: Path) -> None:
    connection = read_only(hour_store)
    try:
        rows = connection.execute(
            "SELECT physical_index, AVG(sm_active_percent), AVG(tensor_active_percent), "
            "AVG(dram_active_percent), SUM(throttled * s.duration_s) FROM gpu_samples g "
            "JOIN samples s ON s.id = g.sample_id GROUP BY physical_index"
        ).fetchall()
    finally:
        connection.close()
    by_card = {row[0]: row[1:] for row in rows}
    assert by_card[0][:3] == (3.0, 0.0, 1.0)
    assert by_card[1][:3] == (50.0, 30.0, 40.0)
    assert by_card[1][3] == pytest.approx(600, abs=INTERVAL_S)  # the power cap's 10 minutes
    assert by_card[0][3] == 0
    assert by_card[2][:3] == (None, None, None)  # no GPM on the A100: nothing, never 0


def test_report_by_gpu_gives_each_cards_mean_sm_and_tensor_active(hour_store: Path) -> None:
    rows = report(hour_store, ReportBy.GPU)
    assert rows[0].mean_sm_active_percent == pytest.approx(3.0)
    assert rows[0].mean_tensor_active_percent == pytest.approx(0.0)
    assert rows[1].mean_sm_active_percent == pytest.approx(50.0)
    assert rows[1].mean_tensor_active_percent == pytest.approx(30.0)
    assert rows[2].mean_sm_active_percent is None and rows[2].mean_tensor_active_percent is None


def test_report_by_user_weights_the_cards_each_held_by_time(hour_store: Path) -> None:
    rows = report(hour_store, ReportBy.USER)
    assert rows["alice"].mean_sm_active_percent == pytest.approx((3 + 50) / 2, abs=0.1)
    assert rows["alice"].mean_tensor_active_percent == pytest.approx(15.0, abs=0.1)
    assert rows["bob"].mean_sm_active_percent == pytest.approx(50.0)
    assert rows["carol"].mean_sm_active_percent is None


def test_a_process_alone_on_a_gpm_card_is_judged_idle_by_sm_active(hour_store: Path) -> None:
    """alice's process says 90 % SM, but it is alone on card 0 and the SMs are 3 % active:
    idle the whole hour. On card 1 (two processes) each process's own SM % judges."""
    rows = report(hour_store, ReportBy.GPU)
    assert rows[0].idle_held_seconds == pytest.approx(HOUR, abs=INTERVAL_S)
    assert rows[0].mean_sm_util == pytest.approx(90.0)  # what the process itself said
    processes = report(hour_store, ReportBy.PROCESS)
    assert processes[4300002].idle_held_seconds == 0  # alice on card 1: SM 60 %
    assert processes[4300003].idle_held_seconds == pytest.approx(HOUR, abs=INTERVAL_S)  # bob
    assert processes[4300004].idle_held_seconds == pytest.approx(HOUR, abs=INTERVAL_S)  # carol


def test_report_json_has_the_activity_keys(hour_store: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from gputop.cli.main import main

    assert (
        main(
            [
                "report",
                "--db",
                str(hour_store),
                "--since",
                "2025-12-31",
                "--until",
                "2026-01-03",
                "--by",
                "job",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["rows"] == []  # no jobs here: keys come below
    assert (
        main(
            [
                "report",
                "--db",
                str(hour_store),
                "--since",
                "2025-12-31",
                "--until",
                "2026-01-03",
                "--by",
                "gpu",
                "--json",
            ]
        )
        == 0
    )
    rows = {row["key"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert rows[1]["mean_sm_active_percent"] == pytest.approx(50.0)
    assert rows[1]["mean_tensor_active_percent"] == pytest.approx(30.0)
    assert rows[2]["mean_sm_active_percent"] is None
    assert (
        main(
            [
                "report",
                "--db",
                str(hour_store),
                "--since",
                "2025-12-31",
                "--until",
                "2026-01-03",
                "--by",
                "gpu",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert "SM ACTIVE" in table and "TENSOR" in table


def test_the_card_series_carries_activity_for_the_history_screen(hour_store: Path) -> None:
    connection = read_only(hour_store)
    try:
        start = START_TIME
        series = {s.physical_index: s for s in gpu_series(connection, start, start + HOUR + 1, 12)}
    finally:
        connection.close()
    assert {v for v in series[1].sm_active_percent if v is not None} == {50.0}
    assert {v for v in series[1].tensor_active_percent if v is not None} == {30.0}
    assert {v for v in series[1].dram_active_percent if v is not None} == {40.0}
    assert set(series[2].sm_active_percent) == {None}


def test_roll_ups_keep_the_activity_means(tmp_path: Path) -> None:
    store = tmp_path / "rolled.db"
    scenario = activity_holders(tmp_path / "holders.json")
    # half an hour: the power cap's 10 minutes, then three roll-ups 10 minutes apart
    # (RETENTION_EVERY_S), each of the rows older than a minute
    record_stepped(scenario, store, samples=HOUR_SAMPLES // 2, retention=Retention(full_s=60.0))
    rows = report(store, ReportBy.GPU)
    assert rows[1].mean_sm_active_percent == pytest.approx(50.0)
    assert rows[0].mean_sm_active_percent == pytest.approx(3.0)
    connection = read_only(store)
    try:
        throttled = connection.execute(
            "SELECT SUM(throttled * s.duration_s) FROM gpu_samples g JOIN samples s "
            "ON s.id = g.sample_id WHERE physical_index = 1"
        ).fetchone()[0]
    finally:
        connection.close()
    assert throttled == pytest.approx(600, abs=INTERVAL_S)


def test_a_version_1_store_is_migrated_keeping_its_rows(tmp_path: Path) -> None:
    store = tmp_path / "old.db"
    connection = open_for_recording(store, [])
    connection.execute("INSERT INTO samples (t, duration_s, resolution_s) VALUES (100, 5, 0)")
    connection.close()
    make_version_1(store)
    connection = sqlite3.connect(store)
    connection.execute("INSERT INTO gpu_samples VALUES (1, 0, NULL, 40, 10, 20, 100, 50)")
    connection.commit()
    connection.close()
    connection = open_for_recording(store, [])
    try:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
        row = connection.execute("SELECT * FROM gpu_samples").fetchone()
    finally:
        connection.close()
    assert row == (1, 0, None, 40.0, 10, 20, 100.0, 50.0, None, None, None, None)


def test_damaged_activity_values_count_as_unknown(tmp_path: Path) -> None:
    store = tmp_path / "damaged.db"
    record_stepped(activity_holders(tmp_path / "holders.json"), store, samples=24)
    connection = sqlite3.connect(store)
    connection.execute("UPDATE gpu_samples SET sm_active_percent = 'lots' WHERE physical_index = 1")
    connection.execute("UPDATE gpu_samples SET tensor_active_percent = -5 WHERE physical_index = 1")
    connection.commit()
    connection.close()
    rows = report(store, ReportBy.GPU)
    assert rows[1].mean_sm_active_percent is None
    assert rows[1].mean_tensor_active_percent is None
    assert rows[0].mean_sm_active_percent == pytest.approx(3.0)


def test_the_card_history_screen_plots_activity_or_says_it_is_not_available(
    hour_store: Path,
) -> None:
    from gputop.core.history.card_history import read_card_history
    from gputop.tui.screens.card_history import render_card_history

    now = START_TIME + HOUR
    hopper = render_card_history(read_card_history(hour_store, 1, 3600.0, now, 60)).plain
    for title, mean in (("SM active", 50), ("tensor active", 30), ("DRAM", 40)):
        assert f"{title}  mean {mean} %  peak {mean} %" in hopper
    assert "not available" not in hopper
    ampere = render_card_history(read_card_history(hour_store, 2, 3600.0, now, 60)).plain
    assert ampere.count("not available on this GPU") == 1
    assert "SM active  mean" not in ampere


def test_a_lab_hosts_activity_series_is_checked_where_it_enters() -> None:
    from gputop.core.history.series import GpuSeries
    from gputop.core.remote.agent_history import _series_from_json, _series_json

    sent = GpuSeries(1, None, (50.0, None), (1.0, 2.0), 10, (40.0, None), (5.0, 6.0), (7.0, 8.0))
    document = json.loads(json.dumps(_series_json(sent)))
    assert _series_from_json(document) == sent
    document["sm_active_percent"] = [250, "x"]  # out of range, not a number: gaps
    document["tensor_active_percent"] = [1.0]  # the wrong length: none at all
    del document["dram_active_percent"]  # an older agent: none at all
    received = _series_from_json(document)
    assert received is not None
    assert received.sm_active_percent == (None, None)
    assert received.tensor_active_percent == () and received.dram_active_percent == ()
