"""The PyTorch view: a lost GPU among the cuda:N is said; UUIDs and mappings never split."""

from __future__ import annotations

import io

from helpers.dashboard import first_sample, make_app
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from gputop.tui.app import GputopApp

BIG = (160, 48)


async def panel_text(app: GputopApp, pilot: Pilot[None], width: int = 50) -> str:
    await pilot.pause()
    body = app.query_one("#torch-body", Static)
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(body.content)
    return console.export_text()


async def test_a_lost_gpu_among_the_cuda_devices_is_marked_and_warned_of() -> None:
    app = make_app("faulty")  # GPU 2 is lost after 5 s; the clock is at 30 s
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert app.snapshot is not None and app.snapshot.gpus[2].lost
        text = await panel_text(app, pilot, width=200)
        rows = [line for line in text.splitlines() if line.strip().startswith("cuda:0 ")]
        (row,) = [line for line in rows if "→" not in line]  # the table, not the preview
        assert row.split()[1:3] == ["2", "LOST"]
        assert "cuda:0 is GPU 2, which is LOST (NVML cannot reach it)" in text


async def test_before_the_gpu_is_lost_there_is_no_such_warning() -> None:
    app = make_app("faulty", at_s="1")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert app.snapshot is not None and not app.snapshot.gpus[2].lost
        text = await panel_text(app, pilot, width=200)
        assert "LOST" not in text


async def test_uuids_and_mappings_of_the_launch_preview_are_never_cut() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("space", "right", "space", "right", "space", "right", "space")
        text = await panel_text(app, pilot, width=50)
        assert app.snapshot is not None
        for gpu in app.snapshot.gpus:
            assert gpu.uuid is not None
            assert any(line.strip().rstrip(",") == gpu.uuid for line in text.splitlines())
        for index in range(4):
            assert any(line.strip() == f"cuda:{index} → GPU {index}" for line in text.splitlines())


async def test_in_a_narrow_view_cuda_n_and_its_gpu_are_kept_and_the_name_gives_way() -> None:
    app = make_app("faulty", at_s="1")  # a long name: Tesla P100-PCIE-16GB
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        for width in (48, 40):  # Rich squeezed cuda:0 to "cud…" at 48 and dropped it at 40
            text = await panel_text(app, pilot, width=width)
            rows = [line.split() for line in text.splitlines() if line.startswith(" cuda:")]
            table = [row for row in rows if "→" not in row]
            assert [row[:2] for row in table] == [["cuda:0", "0"], ["cuda:1", "2"], ["cuda:2", "1"]]
