"""MIG instances as launch targets in the dashboard: highlight with m, select with space.

The ``mig`` scenario: GPU 0 in MIG mode with devices 0 (3g.40gb), 1 (2g.20gb), 2 (1g.10gb);
GPU 1 whole; driver R550, so a CUDA process enumerates one MIG device only.
"""

from __future__ import annotations

import time

from helpers.dashboard import first_sample, make_app, plain_text
from rich.text import Text
from textual.widgets import Static

from gputop.tui.app import GputopApp
from gputop.tui.screens.launch import LaunchScreen
from gputop.tui.widgets.gpu_grid import GpuGrid

BIG = (160, 48)
MIG_0 = "MIG-420ed452-1550-dcdc-1ac3-896098f71881"
MIG_1 = "MIG-4fd95d93-9b6c-cbc0-9143-9fb3322c58bd"
MIG_2 = "MIG-a13e59d2-2a9b-e1ae-eda6-91dfbd49f7ce"


def grid(app: GputopApp) -> GpuGrid:
    return app.query_one(GpuGrid)


def torch_preview(app: GputopApp) -> str:
    """The PyTorch view's text, a long value put back on one line (the panel gives each UUID
    of a long one its own: tests/tui/test_torch_panel_cosmetics.py)."""
    text = plain_text(app.query_one("#torch-body"), width=400)
    return text.replace("=\n    ", "=").replace(",\n    ", ",")


def mig_line(app: GputopApp) -> Text:
    (line,) = [row for row in grid(app).card_content(0) if row.plain.startswith("MIG")]
    return line


def reversed_part(line: Text) -> str:
    (span,) = [span for span in line.spans if str(span.style) == "reverse"]
    return line.plain[span.start : span.end]


async def test_m_walks_the_highlight_through_a_mig_cards_instances_and_back() -> None:
    app = make_app("mig")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert grid(app).selection == (0,)
        seen = []
        for _ in range(4):
            await pilot.press("m")
            seen.append(grid(app).selection)
        assert seen == [(MIG_0,), (MIG_1,), (MIG_2,), (0,)]


async def test_a_highlighted_instance_is_the_launch_preview_pinned_by_its_mig_uuid() -> None:
    app = make_app("mig")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("m", "m")
        await pilot.pause()
        preview = torch_preview(app)
        assert "Launch on GPU 0:1 (MIG 2g.20gb):" in preview
        assert f"CUDA_VISIBLE_DEVICES={MIG_1}" in preview
        assert "cuda:0 → GPU 0:1 (MIG 2g.20gb)" in preview


async def test_space_selects_instances_and_the_card_marks_them() -> None:
    app = make_app("mig")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("m", "m", "space", "m", "space")
        await pilot.pause()
        assert grid(app).selection == (MIG_1, MIG_2)
        line = mig_line(app)
        assert line.plain == "MIG 3g.40gb ●2g.20gb ●1g.10gb"
        assert reversed_part(line) == "●1g.10gb"  # the highlighted one


async def test_two_instances_before_r570_warn_that_the_job_sees_only_one() -> None:
    app = make_app("mig")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("m", "m", "space", "m", "space")
        await pilot.pause()
        preview = torch_preview(app)
        assert f"CUDA_VISIBLE_DEVICES={MIG_1},{MIG_2}" in preview
        assert "⚠ With driver R550 (before R570) a CUDA process sees a single MIG instance" in (
            preview
        )


async def test_moving_to_another_card_leaves_the_instances() -> None:
    app = make_app("mig")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("m", "right")
        assert grid(app).selection == (1,)
        await pilot.press("left")
        assert grid(app).selection == (0,)


async def test_the_launch_dialog_takes_the_instance_and_judges_it_alone() -> None:
    app = make_app("mig")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("m", "m", "m", "l")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)
        assert app.screen.context.physical_indices == (MIG_2,)
        title = plain_text(app.screen.query_one("#launch-title", Static))
        assert "Launch on GPU 0:2 (MIG 1g.10gb)" in title
        preview = plain_text(app.screen.query_one("#preview", Static), width=200)
        assert f"CUDA_VISIBLE_DEVICES={MIG_2}" in preview
        assert "⚠ GPU 0:2 (MIG 1g.10gb) is busy: 1 process(es) of ben" in preview


# -- the PyTorch view says where its cuda:N order comes from ---------------------------------


async def test_without_probes_the_pytorch_view_flags_its_order_as_an_estimate() -> None:
    app = make_app("mixed")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert (
            "order: fastest first, estimated by gputop (probes off); the GPUs differ, so it "
            "may be wrong"
        ) in torch_preview(app)


async def test_with_probes_the_order_stays_an_estimate_for_gpus_the_driver_does_not_have() -> None:
    """Simulated GPUs: whatever this machine's driver answers, it cannot list them."""
    app = make_app("mixed", probes=True)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        deadline = time.monotonic() + 30
        while "checking…" in torch_preview(app).split("Driver:")[0]:
            assert time.monotonic() < deadline, "the driver probe never answered"
            await pilot.pause(0.1)
        assert "order: fastest first, estimated by gputop (" in torch_preview(app)
