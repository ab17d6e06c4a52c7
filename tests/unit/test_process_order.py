"""The process table's order on a server whose readings move: held still, yet as the title says.

The rows are made by ``RowMaker`` (the widget only draws them), so the order is tested here
without Textual; the rule itself (``gputop/tui/row_order.py``) is tested in
test_row_order.py, the table on screen in tests/tui/test_process_table.py.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from helpers.jobs import snapshot_of
from helpers.row_order import is_held_order

from gputop.core.model import GpuProcess, Snapshot
from gputop.tui.widgets.process_rows import SORT_KEYS, RowMaker, shown_bytes

BY_MEMORY = SORT_KEYS[0]
UPDATES = 30


def _base() -> Snapshot:
    return snapshot_of("dgx-h100")  # 200 processes: 8 ranks at 44G, 8 servers at 6G, ...


def _with_memory(snapshot: Snapshot, used: dict[int, float]) -> Snapshot:
    """``snapshot`` with each process's GPU memory (bytes) from ``used`` by pid."""
    gpus = tuple(
        dataclasses.replace(
            gpu,
            processes=tuple(
                dataclasses.replace(p, used_memory_bytes=round(used[p.pid])) for p in gpu.processes
            ),
        )
        for gpu in snapshot.gpus
    )
    return dataclasses.replace(snapshot, gpus=gpus)


def _pids(maker: RowMaker, snapshot: Snapshot, reverse: bool = False) -> list[int]:
    """The rows' pids in order, once checked to be in the order the title says."""
    rows = maker.rows(snapshot, only_gpu=None, sort_key=BY_MEMORY, reverse=reverse, job_of_pid={})
    values = {row.process.pid: BY_MEMORY.key(row.process) for row in rows}
    pids = [row.process.pid for row in rows]
    # No row sits above one whose shown memory is clearly larger (the table's margin).
    assert is_held_order(pids, values, BY_MEMORY.margin, descending=not reverse)
    return pids


def _shown(pids: list[int], snapshot: Snapshot) -> list[float]:
    """Each pid's GPU memory as the table shows it, in the order of ``pids``."""
    used = {p.pid: p.used_memory_bytes for gpu in snapshot.gpus for p in gpu.processes}
    return [shown_bytes(used[pid]) for pid in pids]


def test_allocators_jitter_reorders_nothing_over_30_updates_and_a_real_change_moves_at_once() -> (
    None
):
    """Every process's memory moves by up to 2 % each second (an allocator growing and
    shrinking): the order holds through 30 updates. Then one notebook grows from 2.5G to
    10G: it moves above every smaller process at once."""
    base = _base()
    start = {p.pid: float(p.used_memory_bytes or 0) for gpu in base.gpus for p in gpu.processes}
    rng = random.Random(44)
    maker = RowMaker("alice")
    first = _pids(maker, _with_memory(base, start))
    top_before = first[:20]
    reorders = 0
    last = first
    for _ in range(UPDATES):
        used = {pid: size * (1 + rng.uniform(-0.02, 0.02)) for pid, size in start.items()}
        pids = _pids(maker, _with_memory(base, used))
        reorders += pids != last
        last = pids
    assert reorders == 0
    assert last[:20] == top_before

    grown = last[19]  # the 20th row: a notebook at 2.5G
    assert 2.4 * 1024**3 < start[grown] < 2.6 * 1024**3
    used = dict(start)
    used[grown] = 10.0 * 1024**3
    pids = _pids(maker, _with_memory(base, used))
    assert pids.index(grown) == 8  # below the eight 44G ranks, above the 6G servers
    others = [pid for pid in pids if pid != grown]
    assert others == [pid for pid in last if pid != grown]  # nothing else moved


def test_a_row_passes_its_neighbour_only_by_a_clear_margin() -> None:
    """Two 6G processes: 6.0G against 6.2G (3 % more) keeps the order; 6.0G against 6.4G
    (7 % more) swaps them; back to 6.2G against 6.1G, the new order holds."""
    base = _base()
    start = {p.pid: float(p.used_memory_bytes or 0) for gpu in base.gpus for p in gpu.processes}
    maker = RowMaker("alice")
    first = _pids(maker, _with_memory(base, start))
    upper, lower = first[8], first[9]  # two of the eight 6G servers

    def with_two(upper_gib: float, lower_gib: float) -> list[int]:
        used = dict(start)
        used[upper], used[lower] = upper_gib * 1024**3, lower_gib * 1024**3
        return _pids(maker, _with_memory(base, used))

    held = with_two(6.0, 6.2)
    assert held.index(upper) < held.index(lower)
    swapped = with_two(6.0, 6.4)
    assert swapped.index(lower) < swapped.index(upper)
    held_again = with_two(6.1, 6.2)
    assert held_again.index(lower) < held_again.index(upper)


def test_a_change_of_direction_sorts_exactly_and_new_rows_go_where_they_belong() -> None:
    base = _base()
    start = {p.pid: float(p.used_memory_bytes or 0) for gpu in base.gpus for p in gpu.processes}
    maker = RowMaker("alice")
    _pids(maker, _with_memory(base, start))
    ascending = _pids(maker, _with_memory(base, start), reverse=True)
    shown = _shown(ascending, base)
    assert shown == sorted(shown)  # a plain sort: the direction changed

    # A process that comes with 30G (one of GPU 0's taken away and back with more).
    descending = _pids(maker, _with_memory(base, start))
    gone = descending[30]
    without = dataclasses.replace(
        base,
        gpus=tuple(
            dataclasses.replace(g, processes=tuple(p for p in g.processes if p.pid != gone))
            for g in base.gpus
        ),
    )
    assert gone not in _pids(maker, _with_memory(without, start))
    used = dict(start)
    used[gone] = 30.0 * 1024**3
    back = _pids(maker, _with_memory(base, used))
    assert back.index(gone) == 8
    assert [p for p in back if p != gone] == [p for p in descending if p != gone]


def test_resort_now_sorts_exactly_by_what_is_shown() -> None:
    """``o``: the rows that the margin held in place are put in their exact order."""
    base = _base()
    start = {p.pid: float(p.used_memory_bytes or 0) for gpu in base.gpus for p in gpu.processes}
    maker = RowMaker("alice")
    first = _pids(maker, _with_memory(base, start))
    used = dict(start)
    used[first[9]] = 6.2 * 1024**3  # within the margin of the 6.0G above it: held
    assert _pids(maker, _with_memory(base, used)) == first
    maker.resort()
    snapshot = _with_memory(base, used)
    resorted = _pids(maker, snapshot)
    assert resorted.index(first[9]) == 8
    shown = _shown(resorted, snapshot)
    assert shown == sorted(shown, reverse=True)


MOVING = {
    "GPU memory": ("used_memory_bytes", 0.02, 0.0),
    "GPU": ("used_memory_bytes", 0.02, 0.0),
    "host memory": ("host_memory_bytes", 0.02, 0.0),
    "CPU": ("cpu_percent", 0.0, 4.0),
    "SM": ("sm_util_percent", 0.0, 4.0),
}
"""Each sort column on a reading that moves: the reading, and a jitter (a share, points)
below half the column's margin."""


@pytest.mark.parametrize("name", sorted(MOVING))
def test_every_moving_column_holds_under_jitter_and_moves_for_a_real_change(name: str) -> None:
    """A reading moving by less than half its column's margin, every process every update:
    30 updates, no reorder. Then the last row's reading jumps far past the first's: it moves
    at once (to the top, or its card's top for the GPU column)."""
    key = next(k for k in SORT_KEYS if k.name == name)
    field, share, points = MOVING[name]
    base = _base()
    processes = [p for gpu in base.gpus for p in gpu.processes]
    start = {p.pid: float(getattr(p, field) or 0) for p in processes}
    rng = random.Random(name)

    def snapshot_with(readings: dict[int, float]) -> Snapshot:
        def moved(p: GpuProcess) -> GpuProcess:
            value = readings[p.pid]
            changes: dict[str, Any] = {field: value if field == "cpu_percent" else round(value)}
            return dataclasses.replace(p, **changes)

        gpus = tuple(
            dataclasses.replace(g, processes=tuple(moved(p) for p in g.processes))
            for g in base.gpus
        )
        return dataclasses.replace(base, gpus=gpus)

    def order(readings: dict[int, float]) -> list[int]:
        rows = maker.rows(
            snapshot_with(readings), only_gpu=None, sort_key=key, reverse=False, job_of_pid={}
        )
        values = {row.process.pid: key.key(row.process) for row in rows}
        pids = [row.process.pid for row in rows]
        assert is_held_order(pids, values, key.margin, *key.directions(False))
        return pids

    maker = RowMaker("alice")
    first = order(start)
    for _ in range(UPDATES):
        jittered = {
            pid: max(0.0, value * (1 + rng.uniform(-share, share)) + rng.uniform(-points, points))
            for pid, value in start.items()
        }
        assert order(jittered) == first
    last = first[-1]
    leader = next(pid for pid in first if (name != "GPU") or _card(base, pid) == _card(base, last))
    jumped = dict(start)
    jumped[last] = start[leader] * 3 + 100
    if field == "sm_util_percent":
        jumped = {pid: min(value, 60.0) for pid, value in start.items()} | {last: 100.0}
    moved = order(jumped)
    assert moved.index(last) < first.index(last)
    assert moved.index(last) <= moved.index(leader)


def _card(snapshot: Snapshot, pid: int) -> int:
    return next(p.physical_index for g in snapshot.gpus for p in g.processes if p.pid == pid)
