"""CPU of the dashboard: 20 hosts fed at 1 s against one local host (issue 12, item 7).

Run: ``.venv/bin/python tests/bench/lab_dashboard_cpu.py [SECONDS] [RUNS]``. Each dashboard
runs headless (Textual's test driver: layout, compositing and painting, no terminal) at
160x48 for SECONDS (default 20), RUNS times each (default 3), in turns; the CPU time of
this process over each window is measured, and the medians (min-max) and their ratio are
reported. The one
host samples the simulated v100x4 in-process (clock running), like ``gputop --fake v100x4``.
The lab's
20 hosts are in-process sources that change every second (snapshots taken beforehand from
the simulated scenarios at successive times, so decoding JSON from ssh is not counted here:
that is measured by ``gputop snapshot --hosts ... --stats``, docs/lab.md).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
from dataclasses import replace

from gputop.core.remote.status import HostStatus
from gputop.core.sampling.source import open_backend
from gputop.tui.app import GputopApp
from gputop.tui.lab.fixed_hosts import FixedHosts, simulated_status
from gputop.tui.lab.lab_app import LabApp

SCENARIOS = ("v100x4", "mixed", "v100x4", "demo")


def frames(count: int, steps: int) -> list[list[HostStatus]]:
    return [
        [
            simulated_status(f"gpu{h:02d}", SCENARIOS[h % len(SCENARIOS)], at_s=str(30 + step))
            for h in range(count)
        ]
        for step in range(steps)
    ]


async def measure(app: object, seconds: float, feed: threading.Event | None = None) -> float:
    async with app.run_test(size=(160, 48)) as pilot:  # type: ignore[attr-defined]
        await pilot.pause(2.0)  # first frames and layout are not the steady state
        start = time.process_time()
        await asyncio.sleep(seconds)
        used = time.process_time() - start
    if feed is not None:
        feed.set()
    return 100.0 * used / seconds


def one_local(seconds: float) -> float:
    local = GputopApp(open_backend("v100x4"), probes=False, user="alice", environ={})
    return asyncio.run(measure(local, seconds))


def twenty_hosts(prepared: list[list[HostStatus]], seconds: float) -> float:
    source = FixedHosts(prepared[0])
    stop = threading.Event()

    def feed() -> None:
        step = 0
        while not stop.wait(1.0):
            step += 1
            for position, status in enumerate(prepared[step % len(prepared)]):
                source.set(position, replace(status))

    threading.Thread(target=feed, daemon=True).start()
    app = LabApp(source, [s.host for s in prepared[0]], interval_s=1.0, user="alice")
    return asyncio.run(measure(app, seconds, stop))


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    prepared = frames(20, 5)
    ones: list[float] = []
    twenties: list[float] = []
    for run in range(1, runs + 1):
        ones.append(one_local(seconds))
        twenties.append(twenty_hosts(prepared, seconds))
        print(f"  run {run}: one local host {ones[-1]:.2f} %, 20 hosts {twenties[-1]:.2f} %")
    one, twenty = statistics.median(ones), statistics.median(twenties)
    print(
        f"one local host (v100x4): {one:.2f} % of one core ({min(ones):.2f}-{max(ones):.2f})\n"
        f"20 hosts fed at 1 s: {twenty:.2f} % ({min(twenties):.2f}-{max(twenties):.2f}), "
        f"{twenty / one:.1f}x the one host (goal: at most 2x)"
    )


if __name__ == "__main__":
    main()
