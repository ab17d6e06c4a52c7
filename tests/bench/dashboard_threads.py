"""Where a busy dashboard's CPU goes, by thread: gputop in a pty on the busy server (issue 44).

    python tests/bench/dashboard_threads.py [--tree DIR ...] [--warmup 20] [--window 60]

Each tree's gputop (this checkout's when no ``--tree`` is given; two trees to compare them)
runs side by side in a 200x50 pseudo-terminal, as ``dashboard_bench.py`` runs it, against
one set of live stand-ins of the busy scenario (``busy_scenario.py``, ``stand_ins.py``).
After the warm-up, each thread's CPU time is read from ``/proc/PID/task`` at the start and
the end of the window, and printed per tree as milliseconds a second: the main thread
(Textual: messages, the widgets, compositing, the screen diff, writing), the others (the
sampling loop's worker, the input thread, Python's other threads) and its children (the
PyTorch probe), together what ``dashboard_bench.py`` counts. The trees run at once, so
the machine's load falls on each alike: compare their figures, not one run's with
another's.

A tool for comparing trees, not a check: it prints and exits 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(Path(__file__).resolve().parent)]

from busy_scenario import busy  # noqa: E402
from dashboard_bench import (  # noqa: E402
    COLUMNS,
    ROWS,
    SCENARIO,
    cpu_seconds,
    pump_all,
    spawn,
    subjects,
)
from helpers.pty_terminal import PtyTerminal  # noqa: E402
from stand_ins import live_scenario  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def thread_times(pid: int) -> dict[int, float]:
    """Each thread's user + system CPU seconds (``/proc/PID/task/TID/stat``)."""
    times: dict[int, float] = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        times[int(task)] = (int(fields[11]) + int(fields[12])) / TICKS
    return times


def split(pid: int) -> tuple[float, float, float]:
    """CPU seconds of the main thread, of all its other threads, and of its children."""
    times = thread_times(pid)
    main = times.pop(pid, 0.0)
    others = sum(times.values())
    return main, others, cpu_seconds(pid) - main - others


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tree", type=Path, action="append", help="a checkout of gputop")
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--window", type=float, default=60.0)
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree or [REPO]]
    with live_scenario(SCENARIO, busy) as (scenario, count):
        running: list[tuple[Path, PtyTerminal]] = []
        states: list[Path] = []
        try:
            os.chdir("/")  # ``-m gputop`` imports from PYTHONPATH, not from here
            for tree in trees:
                state = Path(tempfile.mkdtemp(prefix="gputop-threads-"))
                states.append(state)
                gputop = subjects(scenario, state)[0]
                os.environ["PYTHONPATH"] = str(tree)
                running.append((tree, spawn(gputop)))
            terminals = [terminal for _, terminal in running]
            pump_all(terminals, time.monotonic() + args.warmup)
            first = [split(terminal.pid) for terminal in terminals]
            started = time.monotonic()
            pump_all(terminals, started + args.window)
            last = [split(terminal.pid) for terminal in terminals]
            elapsed = time.monotonic() - started
        finally:
            for _, terminal in running:
                terminal.stop()
            for state in states:
                shutil.rmtree(state, ignore_errors=True)
    print(f"{count} stand-ins, {COLUMNS}x{ROWS}, window {elapsed:.0f} s after {args.warmup:g} s")
    for (tree, _), begin, end in zip(running, first, last, strict=True):
        pairs = zip(begin, end, strict=True)
        main_ms, other_ms, child_ms = ((b - a) / elapsed * 1000 for a, b in pairs)
        print(
            f"{tree}: main thread {main_ms:.1f} ms/s, other threads {other_ms:.1f}, "
            f"children {child_ms:.1f}; {(main_ms + other_ms + child_ms) / 10:.2f} % of a core"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
