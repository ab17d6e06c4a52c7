"""The dashboard's sparklines start filled from a recorder's store (docs/history.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.history import holders_scenario, record_stepped

from gputop.core.history.recent import dashboard_history
from gputop.core.history.store import default_history_path
from gputop.core.sampling.source import open_backend


def busier(scenario: str, tmp_path: Path) -> str:
    """The same cards at 90 % instead of 50 %: what the simulation alone would show."""
    document = json.loads(Path(scenario).read_text())
    for gpu in document["gpus"]:
        gpu["utilization_gpu"] = 90
    path = tmp_path / "busier.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_sparklines_start_with_what_the_recorder_stored(tmp_path: Path) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=120)  # to t=600 s, at 50 %
    backend = open_backend(busier(scenario, tmp_path), environ={"GPUTOP_FAKE_TIME": "600"})
    try:
        history = dashboard_history(backend.nvml)
        series = history.series("GPU-11111111-aaaa-bbbb-cccc-000000000000", 0)
    finally:
        backend.close()
    assert len(series) >= 100
    assert set(series[-100:]) == {50}


def test_without_a_store_the_sparklines_start_as_before(tmp_path: Path) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    backend = open_backend(busier(scenario, tmp_path), environ={"GPUTOP_FAKE_TIME": "600"})
    try:
        series = dashboard_history(backend.nvml).series(
            "GPU-11111111-aaaa-bbbb-cccc-000000000000", 0
        )
    finally:
        backend.close()
    assert set(series[-100:]) == {90}


def test_a_store_with_nothing_recent_is_no_history(tmp_path: Path) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=12)  # one minute, long before
    backend = open_backend(busier(scenario, tmp_path), environ={"GPUTOP_FAKE_TIME": "86400"})
    try:
        series = dashboard_history(backend.nvml).series(
            "GPU-11111111-aaaa-bbbb-cccc-000000000000", 0
        )
    finally:
        backend.close()
    assert set(series[-100:]) == {90}


async def test_h_shows_the_highlighted_cards_use_and_who_held_it_idle_first(
    tmp_path: Path,
) -> None:
    from helpers.dashboard import first_sample, make_app, plain_text

    from gputop.tui.screens.card_history import CardHistoryScreen

    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=720)  # the hour to t=3600 s
    app = make_app(scenario, at_s="3600")
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        await pilot.press("right", "H")  # GPU 1: alice's eval beside bob's idle notebook
        screen = app.screen
        assert isinstance(screen, CardHistoryScreen)
        while screen.shown is None:
            await pilot.pause(0.05)
        body = plain_text(screen.query_one("#history-body"), width=160).splitlines()
        assert body[0] == "utilisation  mean 50 %  peak 50 %"  # the card ran at 50 % all hour
        assert body[1].startswith("  100%┤") and body[4].startswith("    0%┤")
        assert body[2].strip("┤ ") == "" and set(body[3][7:]) == {"█"}  # two rows of four
        assert body[5].startswith("memory  peak ")
        assert body[10].split() == ["-1h", "-30m", "now"]
        assert body[11] == "activity (SM, tensor, DRAM): not available on this GPU"  # an A100
        holders = [line.split() for line in body[14:] if line.strip()]
        assert holders[0][:4] == ["!", "bob", "held", "1h00m00s"]
        assert holders[0][-2:] == ["idle", "1h00m00s"]
        assert holders[1][:3] == ["alice", "held", "1h00m00s"]
        assert "carol" not in "\n".join(body)  # she held GPU 2, not this one
        screen.shown = None
        await pilot.press("3")
        while screen.shown is None:
            await pilot.pause(0.05)
        assert "last 7 days" in plain_text(screen.query_one("#history-title"))
        await pilot.press("escape")
        assert not isinstance(app.screen, CardHistoryScreen)


async def test_h_without_a_store_says_how_to_start_one(tmp_path: Path) -> None:
    from helpers.dashboard import first_sample, make_app, plain_text

    from gputop.tui.screens.card_history import CardHistoryScreen

    app = make_app(holders_scenario(tmp_path / "holders.json"))
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        await pilot.press("H")
        screen = app.screen
        assert isinstance(screen, CardHistoryScreen)
        while screen.shown is None:
            await pilot.pause(0.05)
        assert "start 'gputop record'" in plain_text(screen.query_one("#history-body"))


async def highlight_bobs_notebook(app: Any, pilot: Any) -> None:
    """After the first sample: the process table focused, bob's notebook highlighted."""
    from helpers.dashboard import first_sample

    from gputop.tui.widgets.process_table import ProcessTable

    await first_sample(pilot)
    await pilot.press("tab")
    table = app.query_one(ProcessTable)
    while table.current_process is None or table.current_process.user != "bob":
        await pilot.press("down")


async def test_h_in_the_process_table_shows_that_processs_history(tmp_path: Path) -> None:
    from helpers.dashboard import make_app, plain_text

    from gputop.tui.screens.process_history import ProcessHistoryScreen

    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=720)  # the hour to t=3600 s
    app = make_app(scenario, at_s="3600")
    async with app.run_test(size=(160, 48)) as pilot:
        await highlight_bobs_notebook(app, pilot)
        await pilot.press("H")
        screen = app.screen
        assert isinstance(screen, ProcessHistoryScreen)
        while screen.shown is None:
            await pilot.pause(0.05)
        assert "Process 4300003 bob jupyter-lab" in plain_text(screen.query_one("#history-title"))
        body = plain_text(screen.query_one("#history-body"), width=160).splitlines()
        assert body[0] == "GPU memory (all its cards)"
        assert body[1].startswith(" 10.0G┤") and body[4].startswith("    0M┤")
        # 10 GiB all hour: its own peak, every slice, every row
        assert all(set(line[7:].rstrip()) == {"█"} for line in body[1:5])
        assert body[5].split() == ["-1h", "-30m", "now"]
        assert body[7].split() == [
            "GPU",
            "time",
            "1h00m00s",
            "mean",
            "10.0G",
            "peak",
            "10.0G",
            "SM",
            "0",
            "%",
            "idle",
            "1h00m00s",
        ]


async def test_a_process_detail_shows_what_the_recorder_stored_of_it(tmp_path: Path) -> None:
    from helpers.dashboard import make_app, plain_text

    from gputop.tui.screens.process_detail import ProcessDetailScreen

    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=720)  # the hour to t=3600 s
    app = make_app(scenario, at_s="3600")
    async with app.run_test(size=(160, 48)) as pilot:
        await highlight_bobs_notebook(app, pilot)
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, ProcessDetailScreen)
        while screen.history is None:
            await pilot.pause(0.05)
        body = plain_text(screen.query_one("#detail-history"), width=160).splitlines()
        assert body[0] == "GPU memory (all its cards)"
        assert all(set(line[7:].rstrip()) == {"█"} for line in body[1:5])
        assert body[7].split()[:3] == ["GPU", "time", "1h00m00s"]
        assert body[7].split()[-2:] == ["idle", "1h00m00s"]  # bob held it idle all hour


async def test_the_sparklines_hole_fills_once_the_recorder_writes_its_next_batch(
    tmp_path: Path,
) -> None:
    """The dashboard starts at t=600 s while the recorder has written to t=500 s only (it
    writes in batches): the sparklines' last 100 s are a hole until its next batch, which
    the dashboard reads again."""
    from helpers.dashboard import first_sample, make_app
    from helpers.waiting import pilot_wait_for

    scenario = holders_scenario(tmp_path / "holders.json")
    store = default_history_path()
    record_stepped(scenario, store, samples=100)  # to t=500 s, at 50 %
    shown = busier(scenario, tmp_path)
    backend = open_backend(shown, environ={"GPUTOP_FAKE_TIME": "600"})
    try:
        history = dashboard_history(backend.nvml)
    finally:
        backend.close()
    uuid = "GPU-11111111-aaaa-bbbb-cccc-000000000000"
    past = history.series(uuid, 0)
    assert set(past[-45:]) == {None} and set(past[-100:-55]) == {50}  # the hole, and before it
    app = make_app(shown, at_s="600", history=history)
    app.refill_every_s = 0.05
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        record_stepped(scenario, store, samples=20, start_s=500)  # the next batch: to 600 s

        def filled() -> bool:
            """the 100 s before the dashboard's start in the sparkline's past"""
            return set(app.history.series(uuid, 0)[-100:]) == {50}

        await pilot_wait_for(pilot, filled)


async def test_h_on_another_card_at_a_recorded_index_shows_no_history(tmp_path: Path) -> None:
    """GPU 0 is now another card (another UUID): the recorded GPU 0's readings and holders
    are not its history. GPU 1, the same card as recorded, still has its own."""
    from helpers.dashboard import first_sample, make_app, plain_text

    from gputop.tui.screens.card_history import CardHistoryScreen

    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=24)  # to t=120 s
    document = json.loads(Path(scenario).read_text())
    document["gpus"][0]["uuid"] = "GPU-22222222-dddd-eeee-ffff-000000000000"
    replaced = tmp_path / "replaced.json"
    replaced.write_text(json.dumps(document))
    app = make_app(str(replaced), at_s="120")
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        await pilot.press("H")
        screen = app.screen
        assert isinstance(screen, CardHistoryScreen)
        while screen.shown is None:
            await pilot.pause(0.05)
        body = plain_text(screen.query_one("#history-body"), width=160)
        assert "Nothing was recorded for this card in this window." in body
        assert "alice" not in body
        await pilot.press("escape", "right", "H")
        screen = app.screen
        assert isinstance(screen, CardHistoryScreen)
        while screen.shown is None:
            await pilot.pause(0.05)
        body = plain_text(screen.query_one("#history-body"), width=160)
        assert "bob" in body and "alice" in body


def test_a_process_plotted_in_a_slice_it_held_only_in_part_shows_what_it_held(
    tmp_path: Path,
) -> None:
    """The recorder ran the last 20 s of the hour only: the plot's last minute shows bob's
    10 GiB, as its mean and peak say, not 10 GiB spread over the whole minute (3.3G)."""
    from helpers.history import BOB_NOTEBOOK

    from gputop.core.history.process_history import read_process_history
    from gputop.tui.screens.process_history import render_process_history

    scenario = holders_scenario(tmp_path / "holders.json")
    last = record_stepped(scenario, default_history_path(), samples=4, start_s=3580.0)
    (notebook,) = (
        process for gpu in last.gpus for process in gpu.processes if process.pid == BOB_NOTEBOOK
    )
    found = read_process_history(  # the hour to the last sample, in minutes
        default_history_path(), BOB_NOTEBOOK, notebook.start_time, 3600.0, last.timestamp, 60
    )
    assert found.summary is not None and found.summary.peak_memory_bytes == 10 * 1024**3
    assert found.memory_used_bytes[:-1] == (None,) * 59
    assert found.memory_used_bytes[-1] == 10 * 1024**3
    body = render_process_history(found).plain.splitlines()
    assert body[1].startswith(" 10.0G┤"), body


def test_a_process_on_two_cards_at_once_adds_them_up_in_a_slice_held_in_part() -> None:
    from gputop.core.history.process_history import _memory_columns

    gib = 1024**3
    # 10 GiB on one card and 20 GiB on another, both for the slice's second half only
    spans = [(30.0, 60.0, 10 * gib * 30.0, 30.0), (30.0, 60.0, 20 * gib * 30.0, 30.0)]
    assert _memory_columns(spans, 0.0, 120.0, 2) == (30 * gib, None)
    # one card after the other: 10 GiB, then 20 GiB, each a quarter of the slice
    spans = [(0.0, 15.0, 10 * gib * 15.0, 15.0), (15.0, 30.0, 20 * gib * 15.0, 15.0)]
    assert _memory_columns(spans, 0.0, 60.0, 1) == (15 * gib,)
