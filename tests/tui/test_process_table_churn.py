"""The process tables on screen while every process's memory churns: the rows hold still.

The rule is tested alone in tests/unit/test_row_order.py and through the row maker in
tests/unit/test_process_order.py; here the dashboard's table (and the lab's, across hosts)
is driven through 30 seconds of a server whose allocators grow and shrink every second.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

from helpers.dashboard import first_sample, make_app
from helpers.jobs import snapshot_of
from helpers.row_order import is_held_order
from textual.app import App, ComposeResult

from gputop.core.model import Snapshot
from gputop.tui.lab.lab_processes import HostRows, LabProcessTable
from gputop.tui.widgets.process_rows import SORT_KEYS, ProcessRow, shown_bytes
from gputop.tui.widgets.process_table import ProcessTable

SCENARIO = Path(__file__).parents[2] / "gputop" / "core" / "fake" / "scenarios" / "dgx-h100.json"
SECONDS = 30
TOP = 20
BIG = (200, 50)


def churning_scenario(directory: Path) -> str:
    """dgx-h100 with every process's GPU memory moving by up to 2 % every second."""
    scenario = json.loads(SCENARIO.read_text())
    for gpu in scenario["gpus"]:
        for process in gpu.get("processes", []):
            used = process.get("used_memory_mib")
            if isinstance(used, (int, float)) and used > 0:
                process["used_memory_mib"] = {
                    "base": used,
                    "jitter": used * 0.02,
                    "jitter_period": 1,
                    "min": 0,
                }
    path = directory / "churning.json"
    path.write_text(json.dumps(scenario))
    return str(path)


def as_titled(rows: tuple[ProcessRow, ...] | list[ProcessRow]) -> bool:
    """No row above one whose shown GPU memory is clearly larger."""
    key = SORT_KEYS[0]
    values = {row.key: key.key(row.process) for row in rows}
    return is_held_order([row.key for row in rows], values, key.margin, descending=True)


async def test_the_first_rows_hold_their_order_through_30_seconds_of_churn(
    tmp_path: Path,
) -> None:
    app = make_app(churning_scenario(tmp_path))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        nvml = app.backend.nvml
        first = [row.key for row in table.rows[:TOP]]
        shown_memory = set()
        for _ in range(SECONDS):
            nvml.set_time(nvml.now() + 1.0)
            table.show(app.backend.sample())
            await pilot.pause()
            assert [row.key for row in table.rows[:TOP]] == first
            assert as_titled(table.rows)
            shown_memory.add(tuple(row.text(4) for row in table.rows[:TOP]))
        assert len(shown_memory) > SECONDS // 2  # the memory did move, on screen

        await pilot.press("o")  # re-sort now: exactly by what is shown
        shown = [shown_bytes(row.process.used_memory_bytes) for row in table.rows]
        assert shown == sorted(shown, reverse=True)
        assert {row.key for row in table.rows[:8]} == set(first[:8])  # the ranks stay on top


class _LabTable(App[None]):
    def compose(self) -> ComposeResult:
        yield LabProcessTable(user="alice", host_names=["gpu01", "gpu02"], id="processes")


def _jittered(snapshot: Snapshot, rng: random.Random) -> Snapshot:
    gpus = tuple(
        dataclasses.replace(
            gpu,
            processes=tuple(
                dataclasses.replace(
                    p, used_memory_bytes=round((p.used_memory_bytes or 0) * rng.uniform(0.98, 1.02))
                )
                for p in gpu.processes
            ),
        )
        for gpu in snapshot.gpus
    )
    return dataclasses.replace(snapshot, gpus=gpus)


async def test_the_lab_table_holds_its_order_across_hosts_through_churn() -> None:
    """Two hosts with the same jobs: their ranks tie across hosts, and hold still."""
    base = snapshot_of("dgx-h100")
    rng = random.Random(44)
    app = _LabTable()
    async with app.run_test(size=BIG) as pilot:
        table = app.query_one(LabProcessTable)

        def show() -> list[str]:
            table.show_hosts(
                [HostRows(name, _jittered(base, rng), "alice") for name in ("gpu01", "gpu02")]
            )
            return [row.key for row in table.rows[:TOP]]

        first = show()
        await pilot.pause()
        assert table.row_count == 400 and as_titled(table.rows)
        assert {key.split(":")[0] for key in first[:16]} == {"0", "1"}  # both hosts' ranks
        for _ in range(SECONDS):
            assert show() == first
            assert as_titled(table.rows)

        held = [shown_bytes(row.process.used_memory_bytes) for row in table.rows]
        assert held != sorted(held, reverse=True)  # the margin held rows out of exact order
        table.resort()  # o: exactly by what is shown, across hosts
        shown = [shown_bytes(row.process.used_memory_bytes) for row in table.rows]
        assert shown == sorted(shown, reverse=True)
