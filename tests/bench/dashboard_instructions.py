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
import os
import pstats
import shutil
import sys
from pathlib import Path

from busy_instructions import (
    REPO,
    busy_dashboard,
    busy_scenario_file,
    print_instructions_each,
)

WARM_SAMPLES = 10
"""Samples shown before any is counted: caches filled as in a running dashboard."""
SNAPSHOTS = 80
"""Snapshots made before either count: the same for few and many, as frame_instructions.py
makes them, so that making them (sampling) is no part of a sample shown."""


async def _show(tree: Path, scenario: Path, counted: int, profile: str | None) -> None:
    """Show ``WARM_SAMPLES + counted`` busy samples in ``tree``'s dashboard, headless."""
    # As many snapshots made for every count (the few and the many): their making is
    # sampling, which a shown sample's count leaves out.
    async with busy_dashboard(tree, scenario, SNAPSHOTS) as (app, pilot, all_made):
        snapshots = all_made[: WARM_SAMPLES + counted]
        from gputop.tui.app import SnapshotSampled  # the tree's, on the path from here

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
    tree = args.tree.resolve()
    if not 1 <= args.samples <= SNAPSHOTS - WARM_SAMPLES - 1:
        parser.error(f"--samples: 1 to {SNAPSHOTS - WARM_SAMPLES - 1}")
    if args.profile:
        with busy_scenario_file() as scenario:
            asyncio.run(_show(tree, scenario, args.samples, args.sort))
        return 0
    print_instructions_each(
        __file__, "--samples-of", tree, args.samples, "sample shown", "samples shown"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
