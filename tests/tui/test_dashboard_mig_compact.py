"""m and space on a MIG card show what they did, on a one-line card (80x24) too; m elsewhere, and
r on a process of no distributed job, say why they do nothing.

The ``mig`` scenario: GPU 0 in MIG mode with devices 0 (3g.40gb), 1 (2g.20gb), 2 (1g.10gb).
"""

from __future__ import annotations

from helpers.dashboard import first_sample, make_app
from helpers.waiting import pilot_wait_for

from gputop.tui.widgets.gpu_grid import GpuGrid

SMALL = (80, 24)


async def test_the_highlighted_and_selected_mig_instances_show_on_a_one_line_card() -> None:
    app = make_app("mig", interval_s=3600.0)
    async with app.run_test(size=SMALL) as pilot:
        await first_sample(pilot)
        grid = app.query_one(GpuGrid)

        def line() -> str:
            (row,) = grid.card_content(0)
            return row.plain

        assert line().startswith("▶○ 0 A100-SXM4-80GB"), line()
        await pilot.press("m")  # the first instance highlighted
        await pilot_wait_for(pilot, lambda: "MIG 3g.40gb" in line(), "the instance named")
        (row,) = grid.card_content(0)
        shown = row.plain.index("MIG 3g.40gb")
        assert "reverse" in str(row.get_style_at_offset(app.console, shown))  # as on a big card
        await pilot.press("m", "space")  # the second, selected
        await pilot_wait_for(pilot, lambda: "●MIG 2g.20gb" in line(), "the instance selected")
        await pilot.press("m", "m")  # the third, then the whole card again
        await pilot_wait_for(pilot, lambda: "MIG ●1 of 3" in line(), "the selection counted")
        assert line().startswith("▶○ 0 MIG ●1 of 3"), line()


def test_a_highlighted_mig_instance_at_80x24_looks_as_approved(snap_compare) -> None:  # type: ignore[no-untyped-def]
    from textual.pilot import Pilot

    async def highlight_the_second(pilot: Pilot[None]) -> None:
        await first_sample(pilot)
        await pilot.press("m", "m", "space")
        await pilot.pause()

    app = make_app("mig", interval_s=3600.0)
    assert snap_compare(app, terminal_size=SMALL, run_before=highlight_the_second)


async def test_m_on_a_card_without_mig_instances_says_why_nothing_happened() -> None:
    app = make_app("mig", interval_s=3600.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        await pilot.press("right", "m")  # GPU 1: a whole A100, not in MIG mode
        await pilot_wait_for(pilot, lambda: bool(app._notifications), "a word")
        (said,) = [n.message for n in app._notifications]
        assert said == "GPU 1 is not in MIG mode: m highlights the MIG instances of a MIG card."


async def test_r_on_a_process_of_no_distributed_job_says_why_nothing_happened() -> None:
    from gputop.tui.widgets.process_table import ProcessTable

    app = make_app("mig", interval_s=3600.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        table.focus()
        await pilot.press("r")  # carl's run_clm.py: one process, no ranks
        await pilot_wait_for(pilot, lambda: bool(app._notifications), "a word")
        (said,) = [n.message for n in app._notifications]
        pid = table.current_process.pid if table.current_process is not None else None
        assert said == (
            f"Process {pid} is no rank of a distributed job: r collapses a job's ranks to one line."
        )
