"""Instructions from ``gputop``'s start to its first complete frame (issue 44).

    python tests/bench/start_instructions.py [--tree DIR] [--runs 3]

The bench's first-frame figure moves by a fifth from run to run on a shared VM; this counts
instructions instead. ``gputop --fake`` on the busy server with its 200 live stand-ins (as
``make bench`` runs it, no recorder's store) goes the CLI's whole way, imports included, to
an app run headless at 200x50 that exits at the first screen update after the first sample
is shown, under ``valgrind --tool=cachegrind``; bytecode is compiled first, so imports read
it as an installed gputop does. The wait for the first sample is lifted (valgrind makes the
sample slower than ``FIRST_SAMPLE_WAIT_S``), so every run counts the same path: the first
sample in the first frame. Prints each run's count and their median. ``--tree DIR`` counts
another checkout's gputop. A tool for comparing two trees, not a check: exits 0, or 2
without valgrind.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE)]

from busy_instructions import _REFS, SIZE  # noqa: E402
from busy_scenario import busy  # noqa: E402
from stand_ins import live_scenario  # noqa: E402

SCENARIO = REPO / "gputop" / "core" / "fake" / "scenarios" / "dgx-h100.json"


def _start(tree: Path, scenario: Path) -> int:
    """``gputop --fake scenario`` of ``tree``, headless, to its first complete frame."""
    sys.path.insert(0, str(tree))
    from gputop.cli import dashboard
    from gputop.tui.app import GputopApp

    dashboard.FIRST_SAMPLE_WAIT_S = 3600.0  # the first sample is in the first frame
    dashboard.require_terminal = lambda: None
    run = GputopApp.run

    def headless_run(app: GputopApp) -> None:
        async def first_frame(pilot: object) -> None:
            if app.query("ProcessTable").first()._snapshot is None:
                raise SystemExit("start_instructions: the first frame had no sample")
            app.exit()

        run(app, headless=True, size=SIZE, auto_pilot=first_frame)

    GputopApp.run = headless_run  # type: ignore[method-assign]
    from gputop.cli.main import main

    return main(["--fake", str(scenario)])


def count(tree: Path, scenario: Path) -> int:
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
    command += ["--cachegrind-out-file=/dev/null", sys.executable, __file__]
    command += ["--start-of", str(tree), str(scenario)]
    environ = {**os.environ, "GPUTOP_STATE_DIR": str(scenario.parent / "state")}
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=environ)
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=REPO)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--start-of", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.start_of:
        return _start(Path(args.start_of[0]), Path(args.start_of[1]))
    if shutil.which("valgrind") is None:
        print("start_instructions: needs valgrind", file=sys.stderr)
        return 2
    tree = args.tree.resolve()
    compileall.compile_dir(tree / "gputop", quiet=1)
    with live_scenario(SCENARIO, busy) as (scenario, processes):
        counts = [count(tree, scenario) for _ in range(args.runs)]
    shown = ", ".join(f"{c / 1e9:.4f}G" for c in counts)
    print(
        f"{tree}: {statistics.median(counts) / 1e9:.4f}G instructions to the first frame "
        f"(median of {args.runs}: {shown}; {processes} live processes, {SIZE[0]}x{SIZE[1]})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
