"""CPU the process table costs, alone, with the ~200 processes of dgx-h100 at 200x50.

Two figures, each the median over many repetitions of CPU time in this process:

- a refresh: ``show()`` of the next second's snapshot and the repaint it causes, sorted by
  GPU memory (the order holds) and by CPU (the order changes every second);
- a highlight move: one ``down`` key press with the table focused.

Headless (``run_test``), so it leaves out the terminal; ``make bench`` measures the whole
dashboard. A benchmark, not a test: its name keeps pytest from collecting it. Compare two
versions on the same machine in the same minute, more than once.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from gputop.tui.screenshots import build_app
from gputop.tui.widgets.process_table import ProcessTable

SIZE = (200, 50)
TICKS = 60
KEYS = 80


async def refresh_cost_ms(sorts: int) -> tuple[str, float]:
    app = build_app("dgx-h100", interval_s=3600)  # no sampling but the first
    async with app.run_test(size=SIZE) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.05)
        table = app.query_one(ProcessTable)
        for _ in range(sorts):
            table.next_sort()
        await pilot.pause()
        nvml = app.backend.nvml
        snapshots = []
        for _ in range(TICKS):
            nvml.set_time(nvml.now() + 1.0)
            snapshots.append(app.backend.sample())
        costs = []
        for snapshot in snapshots:
            started = time.process_time()
            table.show(snapshot)
            await pilot.pause()
            costs.append(time.process_time() - started)
        return table.sort_key.name, statistics.median(costs) * 1000


async def key_cost_ms() -> float:
    app = build_app("dgx-h100", interval_s=3600)
    async with app.run_test(size=SIZE) as pilot:
        while app.snapshot is None:
            await pilot.pause(0.05)
        app.query_one(ProcessTable).focus()
        await pilot.pause()
        costs = []
        for _ in range(KEYS):
            started = time.process_time()
            await pilot.press("down")
            costs.append(time.process_time() - started)
        return statistics.median(costs) * 1000


async def main() -> None:
    for sorts in (0, 2):
        name, cost = await refresh_cost_ms(sorts)
        print(f"refresh, sorted by {name}: {cost:.1f} ms CPU (median of {TICKS})")
    print(f"highlight move (down): {await key_cost_ms():.1f} ms CPU (median of {KEYS})")


if __name__ == "__main__":
    asyncio.run(main())
