"""Instructions the dashboard's main thread spends showing one busy sample (issue 44).

    python tests/bench/dashboard_instructions.py [--tree DIR] [--samples 30]
    python tests/bench/dashboard_instructions.py --profile [--sort tottime]

Like ``frame_instructions.py``, but a sample goes the way it goes in the running app: the
``SnapshotSampled`` message, the app's handler (the status and host lines, the cards, the
process table, the PyTorch view), then Textual's screen update (a layout where a widget
asked for one, the compositor's partial update). The busy server's scenario
(``busy_scenario.py``, no live processes: sampling is left out, the snapshots are made
before the count starts) in a headless app of 200x50, under ``valgrind --tool=cachegrind``:
run once with a few samples and once with many, the difference divided by the extra samples
is one sample's cost. Also printed, without valgrind: how many layouts and screen updates a
sample caused. ``--profile``: cProfile of the counted samples instead, no valgrind.

A tool for comparing two trees (``--tree DIR``: another checkout's gputop), not a check.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SIZE = (200, 50)
WARM_SAMPLES = 10
"""Samples shown before any is counted: caches filled as in a running dashboard."""
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


async def _show(tree: Path, scenario: Path, counted: int, profile: str | None) -> None:
    """Show ``WARM_SAMPLES + counted`` busy samples in ``tree``'s dashboard, headless."""
    sys.path[:0] = [str(tree / "tests"), str(tree)]
    from helpers.dashboard import first_sample

    from gputop.tui.app import SnapshotSampled
    from gputop.tui.screenshots import build_app

    app = build_app(str(scenario), interval_s=3600)  # no sampling but the first
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        nvml = app.backend.nvml
        snapshots = []
        for _ in range(WARM_SAMPLES + counted):
            nvml.set_time(nvml.now() + 1.0)
            snapshots.append(app.backend.sample())
        screen = app.screen
        counts = {"layouts": 0, "updates": 0}
        refresh_layout, compositor_refresh = screen._refresh_layout, screen._compositor_refresh

        def counted_layout(*args: object, **kwargs: object) -> None:
            counts["layouts"] += 1
            refresh_layout(*args, **kwargs)  # type: ignore[arg-type]

        def counted_refresh() -> None:
            counts["updates"] += 1
            compositor_refresh()

        screen._refresh_layout = counted_layout  # type: ignore[method-assign]
        screen._compositor_refresh = counted_refresh  # type: ignore[method-assign]
        profiler = cProfile.Profile() if profile else None
        for shown, snapshot in enumerate(snapshots):
            if shown == WARM_SAMPLES:
                counts = dict.fromkeys(counts, 0)
                if profiler is not None:
                    profiler.enable()
            app.post_message(SnapshotSampled(snapshot, None))
            await pilot.pause()
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler).strip_dirs().sort_stats(profile or "tottime").print_stats(40)
        per = {name: count / max(counted, 1) for name, count in counts.items()}
        print(f"a sample: {per['layouts']:.2f} layouts, {per['updates']:.2f} screen updates")


def _instructions(tree: Path, scenario: Path, counted: int) -> int:
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--samples-of",
        str(tree),
        str(scenario),
        str(counted),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed ({done.returncode}):\n{done.stderr[-2000:]}")
    if counted > 1:
        print(done.stdout.strip())
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="a checkout of gputop")
    parser.add_argument("--samples", type=int, default=30, help="samples counted (default 30)")
    parser.add_argument("--profile", action="store_true", help="cProfile, no valgrind")
    parser.add_argument("--sort", default="tottime", help="the profile's order")
    parser.add_argument("--samples-of", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.samples_of:
        tree, scenario, counted = args.samples_of
        asyncio.run(_show(Path(tree), Path(scenario), int(counted), None))
        return 0
    if not args.profile and shutil.which("valgrind") is None:
        print("dashboard_instructions: needs valgrind", file=sys.stderr)
        return 2
    sys.path[:0] = [str(HERE), str(REPO)]
    from busy_scenario import busy
    from dashboard_bench import SCENARIO

    tree = args.tree.resolve()
    with tempfile.TemporaryDirectory() as folder:
        scenario = Path(folder) / "busy.json"
        scenario.write_text(json.dumps(busy(json.loads(SCENARIO.read_text()))))
        if args.profile:
            asyncio.run(_show(tree, scenario, args.samples, args.sort))
            return 0
        few = _instructions(tree, scenario, 1)
        many = _instructions(tree, scenario, 1 + args.samples)
    per_sample = (many - few) / args.samples
    print(
        f"{tree}: {per_sample / 1e6:.1f}M instructions a busy sample shown "
        f"({args.samples} samples, {SIZE[0]}x{SIZE[1]})"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
