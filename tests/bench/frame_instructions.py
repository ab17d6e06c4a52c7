"""Instructions the main thread spends on one busy frame (tests/bench/frame_instructions.py).

On a shared VM two side-by-side CPU measurements move by several percent from run to run,
more than most single changes to the dashboard. This counts instructions instead, which do
not move: the busy server's scenario (``busy_scenario.py``, no live processes) is sampled in
advance, then frames are shown, composited, written as Textual writes them and diffed, in a
headless app, under ``valgrind --tool=cachegrind``; run once with few frames and once with
many, the difference divided by the extra frames is one frame's cost, start-up left out.
Sampling is left out too (the snapshots are made before either count starts).

A tool for comparing two trees (docs/speed.md, "Third round"), not a check: it prints and
exits 0, or 2 without valgrind. ``--tree DIR`` measures another checkout's gputop with this
file's scenario. Takes a few minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from pathlib import Path

from busy_instructions import REPO, SIZE, busy_dashboard, print_instructions_each

WARM_FRAMES = 10
"""Frames shown before any is counted: caches filled as in a running dashboard."""
SNAPSHOTS = 80


async def _frames(tree: Path, scenario: Path, counted: int) -> None:
    """Show ``WARM_FRAMES + counted`` busy frames of ``tree``'s dashboard, headless."""
    async with busy_dashboard(tree, scenario, SNAPSHOTS) as (app, _, snapshots):
        from gputop.tui.screen_diff import ScreenDiff  # the tree's, on the path from here
        from gputop.tui.widgets.gpu_grid import GpuGrid
        from gputop.tui.widgets.process_table import ProcessTable

        screen = app.screen
        compositor = screen._compositor
        widgets = set(screen.walk_children())
        diff = ScreenDiff()
        diff.filter(compositor.render_full_update().render_segments(app.console), SIZE)
        for snapshot in snapshots[: WARM_FRAMES + counted]:
            app.history.add(snapshot)
            app.query_one(GpuGrid).show(snapshot, app.history, compact=False)
            app.query_one(ProcessTable).show(snapshot)
            compositor.update_widgets(widgets)
            update = compositor.render_update(screen_stack=[])
            if update is not None:
                diff.filter(update.render_segments(app.console), SIZE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="a checkout of gputop")
    parser.add_argument("--frames", type=int, default=60, help="frames counted (default 60)")
    parser.add_argument("--frames-of", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.frames_of:
        tree, scenario, counted = args.frames_of
        asyncio.run(_frames(Path(tree), Path(scenario), int(counted)))
        return 0
    if shutil.which("valgrind") is None:
        print("frame_instructions: needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    if not 1 <= args.frames <= SNAPSHOTS - WARM_FRAMES - 1:
        parser.error(f"--frames: 1 to {SNAPSHOTS - WARM_FRAMES - 1}")
    print_instructions_each(__file__, "--frames-of", args.tree.resolve(), args.frames, "frame")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
