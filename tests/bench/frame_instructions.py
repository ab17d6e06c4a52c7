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
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SIZE = (200, 50)
WARM_FRAMES = 10
"""Frames shown before any is counted: caches filled as in a running dashboard."""
SNAPSHOTS = 80
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


async def _frames(tree: Path, scenario: Path, counted: int) -> None:
    """Show ``WARM_FRAMES + counted`` busy frames of ``tree``'s dashboard, headless."""
    sys.path[:0] = [str(tree / "tests"), str(tree)]
    from helpers.dashboard import first_sample

    from gputop.tui.screen_diff import ScreenDiff
    from gputop.tui.screenshots import build_app
    from gputop.tui.widgets.gpu_grid import GpuGrid
    from gputop.tui.widgets.process_table import ProcessTable

    app = build_app(str(scenario), interval_s=3600)  # no sampling but the first
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        nvml = app.backend.nvml
        snapshots = []
        for _ in range(SNAPSHOTS):
            nvml.set_time(nvml.now() + 1.0)
            snapshots.append(app.backend.sample())
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


def _instructions(tree: Path, scenario: Path, counted: int) -> int:
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--frames-of",
        str(tree),
        str(scenario),
        str(counted),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


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
    sys.path[:0] = [str(HERE), str(REPO)]
    from busy_scenario import busy
    from dashboard_bench import SCENARIO

    with tempfile.TemporaryDirectory() as folder:
        scenario = Path(folder) / "busy.json"
        scenario.write_text(json.dumps(busy(json.loads(SCENARIO.read_text()))))
        started = time.monotonic()
        few = _instructions(args.tree.resolve(), scenario, 1)
        many = _instructions(args.tree.resolve(), scenario, 1 + args.frames)
    per_frame = (many - few) / args.frames
    print(
        f"{args.tree.resolve()}: {per_frame / 1e6:.1f}M instructions a busy frame "
        f"({args.frames} frames, {SIZE[0]}x{SIZE[1]}; {time.monotonic() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
