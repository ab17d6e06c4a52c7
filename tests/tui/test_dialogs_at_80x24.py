"""The dashboard's windows fit an 80x24 terminal: nothing drawn past its right edge, the key
that closes a window seen without scrolling, a title line read whole."""

from __future__ import annotations

from pathlib import Path

from helpers.dashboard import first_sample, make_app, plain_text
from helpers.hostile import screen_text
from helpers.jobs import asked_job
from helpers.waiting import pilot_wait_for
from textual.containers import VerticalScroll
from textual.widgets import Static

from gputop.core.jobs.model import JobState
from gputop.core.jobs.usage import usage_from_json, usage_summary
from gputop.tui.screens.job_log import JobLogScreen
from gputop.tui.screens.process_detail import ProcessDetailScreen

SMALL = (80, 24)


async def test_a_process_detail_fits_80_columns_and_says_how_it_closes() -> None:
    app = make_app("demo", interval_s=3600.0)
    async with app.run_test(size=SMALL) as pilot:
        await first_sample(pilot)
        await pilot.press("tab", "enter")  # the processes, then the first one's detail
        await pilot_wait_for(
            pilot, lambda: isinstance(app.screen, ProcessDetailScreen), "the process detail"
        )
        await pilot.pause()
        dialog = app.screen.query_one("#dialog", VerticalScroll)
        assert dialog.region.right <= SMALL[0], dialog.region  # its right border drawn
        # on its border, seen however far the detail scrolls
        assert "escape" in screen_text(app).splitlines()[dialog.region.bottom - 1]


USAGE = {
    "per_card": [
        {"gpu": card, "uuid": f"GPU-{card}", "peak_memory_bytes": 2 * 1024**3,
         "mean_sm_percent": 25, "gpu_seconds": 54.0, "energy_j": 8300.0, "peak_from": "samples"}
        for card in (2, 3)
    ],
    "gpu_seconds": 108.0,
    "peak_memory_bytes": 4 * 1024**3,
    "energy_j": 16600.0,
    "samples": 50,
}  # fmt: skip


async def test_a_job_logs_title_shows_what_the_job_used_whole_at_80_columns(
    tmp_path: Path,
) -> None:
    usage = usage_from_json(USAGE)
    job = asked_job(
        "sleep",
        id=2,
        physical_indices=(2, 3),
        uuids=("GPU-2", "GPU-3"),
        state=JobState.ENDED,
        exit_code=0,
        log_path=str(tmp_path / "2.log"),
        usage=usage,
    )
    (tmp_path / "2.log").write_text("[gputop] job 2 exited 0 after 55s\n")
    whole = usage_summary(usage)
    assert len(whole) > SMALL[0]  # two cards' use: more than one row at 80 columns
    app = make_app("demo", interval_s=3600.0)
    async with app.run_test(size=SMALL) as pilot:
        await first_sample(pilot)
        await app.push_screen(JobLogScreen(job))
        await pilot.pause()
        title = app.screen.query_one("#log-title", Static)
        wraps = plain_text(title, width=title.content_region.width).rstrip("\n").splitlines()
        assert title.content_region.height >= len(wraps), (title.content_region, wraps)
        shown = " ".join(line.strip() for line in screen_text(app).splitlines()[:5])
        assert "in all 1m48s GPU time, peak 4.0G" in shown, shown


def test_a_process_detail_at_80x24_looks_as_approved(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """Its right border drawn, its close keys on its bottom border."""
    from textual.pilot import Pilot

    async def open_detail(pilot: Pilot[None]) -> None:
        await first_sample(pilot)
        await pilot.press("tab", "enter")
        await pilot_wait_for(
            pilot, lambda: isinstance(pilot.app.screen, ProcessDetailScreen), "the detail"
        )
        await pilot.pause()

    app = make_app("demo", interval_s=3600.0)
    app.history_store = Path("/var/empty/gputop/history.sqlite3")  # one path in every run
    assert snap_compare(app, terminal_size=SMALL, run_before=open_detail)
