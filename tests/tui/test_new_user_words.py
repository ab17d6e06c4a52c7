"""What a new user's ten minutes with the dashboard still found (issue 40): a launch dialog
that did not say the command is not there (gputop run says it), a jobs panel whose last log
line was only gputop's date stamp, a card's health that began its advice in lower case,
the process table's title "all GPUs yours only", ctrl+c in the fleet dashboard, and a
card's history plot one cell too wide at 80x24."""

from __future__ import annotations

import io
import time
from pathlib import Path

from helpers.dashboard import first_sample, make_app, open_launch_dialog, preview_text
from helpers.history import holders_scenario, record_stepped
from helpers.waiting import pilot_wait_for
from rich.cells import cell_len
from rich.console import Console
from textual.widgets import Input, Static

from gputop.core.fleet.model import Fleet
from gputop.core.history.store import default_history_path
from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.model import EccCounts, GpuHealth, XidEvent
from gputop.core.prometheus.client import PrometheusError
from gputop.tui.fleet.fleet_app import FleetApp
from gputop.tui.screens.card_history import CardHistoryScreen, render_card_history
from gputop.tui.screens.health import render_health_screen
from gputop.tui.widgets.jobs_panel import job_cells
from gputop.tui.widgets.process_table import ProcessTable

BIG = (160, 48)


async def test_the_launch_preview_says_a_command_that_is_not_there_will_fail() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_launch_dialog(app, pilot, "right", "right")  # GPU 2: idle
        screen.query_one("#command", Input).value = "nosuchcommand-gputop --flag"
        await pilot.pause()
        assert (
            "nosuchcommand-gputop was not found; the job will fail with exit code 127"
            in preview_text(app)
        )
        screen.query_one("#command", Input).value = "sleep 30"  # on PATH: no such warning
        await pilot.pause()
        assert "not found" not in preview_text(app) and "⚠" not in preview_text(app)
        screen.query_one("#command", Input).value = "nosuchcommand-gputop | tee log"
        await pilot.pause()  # a shell decides: nothing said before it runs
        assert "not found" not in preview_text(app)


def _job(job_id: int, name: str) -> Job:
    return Job(
        id=job_id,
        name=name,
        command=(name, "--flag"),
        command_text=f"{name} --flag",
        uses_shell=False,
        cwd="/tmp",
        physical_indices=(3,),
        uuids=("GPU-x",),
        env={},
        mode=RunMode.DETACHED,
        state=JobState.ENDED,
        log_path="/nonexistent/4.log",
        created_at=0.0,
        exit_code=127,
    )


def test_the_jobs_panel_shows_what_gputop_logged_not_its_date_stamp() -> None:
    job = _job(4, "nosuchcommand")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    said = f"[gputop] {stamp} job 4 could not start: nosuchcommand: command not found"
    cell = job_cells(job, said, 30.0)[-1].plain
    assert cell == "[gputop] could not start: nosuchcommand: command not found"
    named = f"[gputop] {stamp} job 4 (nosuchcommand) starting: nosuchcommand --flag in /tmp"
    shown = job_cells(job, named, 30.0)[-1].plain
    assert shown == "[gputop] starting: nosuchcommand --flag in /tmp"
    own = "epoch 3 [gputop] 2026-12-01 20:00:00 job 4 loss 0.1"  # the program's: as it is
    assert job_cells(job, own, 30.0)[-1].plain == own
    other = f"[gputop] {stamp} job 40 exited 0 after 3s"  # another job's number: kept
    assert job_cells(job, other, 30.0)[-1].plain == "[gputop] job 40 exited 0 after 3s"


def test_a_cards_health_gives_its_advice_as_a_sentence() -> None:
    health = GpuHealth(
        ecc=EccCounts(0, 2, 0, 2),
        retired_pages=None,
        remapped_rows=None,
        pcie_replays=0,
        nvlink_crc_errors=None,
        xid_events=(XidEvent(xid=48, time=100.0, count=1),),
        xid_counts=((48, 1),),
        xid_sources=("nvml events",),
    )
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(render_health_screen(health))
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    (meaning,) = [n for n, line in enumerate(lines) if "may be wrong." in line]
    assert "→ Rerun the jobs that ran on it" in lines[meaning + 1]


async def test_the_process_tables_title_reads_as_words_with_u_and_a_filter() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        await pilot.press("u")
        assert "Processes: all GPUs, yours only, by " in table.describe_view()
        table.set_text_filter("python")
        assert 'Processes: all GPUs, yours only, matching "python", by ' in table.describe_view()
        await pilot.press("u")
        assert 'Processes: all GPUs matching "python", by ' in table.describe_view()


async def test_ctrl_c_in_the_fleet_dashboard_says_in_plain_words_that_q_quits() -> None:
    def no_fleet() -> Fleet:
        raise PrometheusError("Cannot reach Prometheus at http://prometheus:9090: refused.")

    app = FleetApp(no_fleet, "http://prometheus:9090")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+c")
        await pilot_wait_for(pilot, lambda: bool(app._notifications), "the hint")
        assert app.is_running
        (said,) = [str(n.message) for n in app._notifications]
        assert said == "Press q to quit."  # Textual's said "Press [b]ctrl+q[/b] to quit the app"


async def test_a_cards_history_plot_fits_its_window_at_80x24(tmp_path: Path) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=60)
    app = make_app(scenario, at_s="300")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_sample(pilot)
        await pilot.press("H")
        screen = app.screen
        assert isinstance(screen, CardHistoryScreen)
        await pilot_wait_for(pilot, lambda: screen.shown is not None, "the history")
        await pilot.pause()
        body = screen.query_one("#history-body", Static)
        lines = render_card_history(screen.shown).plain.splitlines()  # the plot: no health
        assert any("┤" in line for line in lines) and any(line.endswith("now") for line in lines)
        too_wide = [line for line in lines if cell_len(line) > body.content_region.width]
        assert too_wide == []  # the scale's ┤ was not counted: each plot row wrapped one cell
