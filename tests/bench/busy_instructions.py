"""What ``dashboard_instructions.py`` and ``frame_instructions.py`` share: the busy server's
scenario in a file, a tree's dashboard on it headless with its samples made in advance, and
a run of the script itself under ``valgrind --tool=cachegrind`` whose instructions are
counted.

A script counts its own ``--FLAG tree scenario N`` run once with few units of work and once
with many; the difference divided by the extra units is one unit's cost, start-up left out.
"""

from __future__ import annotations

import compileall
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SIZE = (200, 50)
"""The headless app's size, columns by lines."""
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


class Shown(NamedTuple):
    """A headless dashboard (``busy_dashboard``) and the samples made for it."""

    app: Any
    """The tree's ``GpuTopApp`` (imported from the tree, so not typed here)."""
    pilot: Any
    snapshots: list[Any]


@contextmanager
def busy_scenario_file() -> Iterator[Path]:
    """The busy server's scenario (``busy_scenario.py``, no live processes) in a file."""
    sys.path[:0] = [str(HERE), str(REPO)]
    from busy_scenario import busy
    from dashboard_bench import SCENARIO

    with tempfile.TemporaryDirectory() as folder:
        scenario = Path(folder) / "busy.json"
        scenario.write_text(json.dumps(busy(json.loads(SCENARIO.read_text()))))
        yield scenario


def count_run(script: str, flag: str, tree: Path, scenario: Path, counted: int) -> tuple[int, str]:
    """The instructions of ``script flag tree scenario counted`` under cachegrind, and what
    it printed. ``tree``'s bytecode is compiled first, as an installed gputop's is: a first
    run in a fresh checkout would count compiling it, and one count of two would be off by
    that (a unit's cost came out 2.3M, or -0.1M, instead of 46M)."""
    compileall.compile_dir(tree / "gputop", quiet=1)
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
    command += ["--cachegrind-out-file=/dev/null", sys.executable, script]
    command += [flag, str(tree), str(scenario), str(counted)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", "")), done.stdout.strip()


def print_instructions_each(
    script: str, flag: str, tree: Path, extra: int, unit: str, units: str | None = None
) -> None:
    """Count and print the instructions of one ``unit`` of ``script``'s work on the busy
    scenario (run as ``script flag tree scenario N`` with N = 1, then 1 + ``extra``), after
    what the longer run printed. ``units``: the plural (``unit`` and an s where None)."""
    started = time.monotonic()
    with busy_scenario_file() as scenario:
        few, _ = count_run(script, flag, tree, scenario, 1)
        many, printed = count_run(script, flag, tree, scenario, 1 + extra)
    if printed:
        print(printed)
    print(
        f"{tree}: {(many - few) / extra / 1e6:.1f}M instructions a busy {unit} "
        f"({extra} {units or unit + 's'}, {SIZE[0]}x{SIZE[1]}; {time.monotonic() - started:.0f} s)"
    )


@asynccontextmanager
async def busy_dashboard(tree: Path, scenario: Path, samples: int) -> AsyncIterator[Shown]:
    """``tree``'s dashboard on ``scenario``, headless at ``SIZE``, its first sample shown, and
    ``samples`` more samples made, a simulated second apart, for the caller to show; the
    garbage collector then settled as in the running dashboard (``settle_collector``)."""
    sys.path[:0] = [str(tree / "tests"), str(tree)]
    from helpers.dashboard import first_sample

    from gputop.tui.screenshots import build_app

    app = build_app(str(scenario), interval_s=3600)  # no sampling but the first
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        nvml = app.backend.nvml
        snapshots = []
        for _ in range(samples):
            nvml.set_time(nvml.now() + 1.0)
            snapshots.append(app.backend.sample())
        settle_collector()
        yield Shown(app, pilot, snapshots)


def settle_collector() -> None:
    """The garbage collector tuned as the running ``gputop`` tunes it once started (frozen,
    its young generation collected less often: gputop/tui/collector.py), where the tree
    does; an app run in a test process keeps Python's defaults."""
    try:
        from gputop.tui.collector import settle_collector as settle
    except ImportError:  # a tree from before the tuning
        return
    settle()
