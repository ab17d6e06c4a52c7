"""A process row's figures, made from the numbers they show, are the texts they were made
from before: ``human_bytes``, ``f"{n}%"`` and ``duration_coarse`` of each reading."""

from __future__ import annotations

import dataclasses
import random

from helpers.jobs import snapshot_of

from gputop.core.model import GpuProcess, ProcessType, Snapshot
from gputop.core.units import NA, duration_coarse, human_bytes
from gputop.tui.widgets import process_rows
from gputop.tui.widgets.process_rows import SORT_KEYS, RowMaker

GIB = 1024**3
MIB = 1024**2


def _old_texts(process: GpuProcess, now: float) -> tuple[str, ...]:
    """TYPE to ELAPSED as the rows showed them before, formatted from each reading."""
    sm, cpu, start = process.sm_util_percent, process.cpu_percent, process.start_time
    return (
        process.type.value,
        NA if process.used_memory_bytes is None else human_bytes(process.used_memory_bytes),
        NA if sm is None else f"{sm}%",
        NA if cpu is None else f"{round(cpu)}%",
        NA if process.host_memory_bytes is None else human_bytes(process.host_memory_bytes),
        duration_coarse(None if start is None else now - start),
    )


def _size(rng: random.Random) -> int | None:
    kind = rng.randrange(8)
    if kind == 0:
        return None
    if kind == 1:  # a tie between two tenths: rounded to the even one, as f"{x:.1f}" does
        return (2 * rng.randrange(10, 1500) + 1) * GIB // 20
    if kind == 2:  # at and about the edges of MiB, GiB and tenths
        edge = rng.choice([MIB, GIB, GIB // 10, GIB // 20])
        return max(0, rng.randrange(0, 1600) * edge + rng.randint(-2, 2))
    if kind == 3:
        return rng.randrange(0, GIB)
    if kind == 4:  # past 2**53, where a float is no longer exact
        return rng.randrange(2**53 - 5, 2**60)
    return rng.randrange(0, 200 * GIB)


def _percent(rng: random.Random) -> int | None:
    return rng.choice([None, 0, 100, 101, 350, rng.randrange(0, 101), rng.randrange(0, 3200)])


def _cpu(rng: random.Random) -> float | None:
    return rng.choice([None, 0.5, 1.5, 99.5, 100.4, rng.uniform(0, 120), rng.uniform(0, 3200)])


def _start(rng: random.Random, now: float) -> float | None:
    return rng.choice(
        [None, now + 5, now - 30, now - 60, now - rng.uniform(0, 400_000), now - 3599.99]
    )


def _moved(snapshot: Snapshot, rng: random.Random, now: float) -> Snapshot:
    """``snapshot`` a second later, every process's readings drawn anew."""
    gpus = tuple(
        dataclasses.replace(
            gpu,
            processes=tuple(
                dataclasses.replace(
                    p,
                    type=rng.choice(list(ProcessType)),
                    used_memory_bytes=_size(rng),
                    host_memory_bytes=_size(rng),
                    sm_util_percent=_percent(rng),
                    cpu_percent=_cpu(rng),
                    start_time=_start(rng, now),
                )
                for p in gpu.processes
            ),
        )
        for gpu in snapshot.gpus
    )
    return dataclasses.replace(snapshot, gpus=gpus, timestamp=now)


def test_a_rows_figures_are_the_texts_formatted_from_its_readings() -> None:
    rng = random.Random(44)
    base = snapshot_of("dgx-h100")
    lead = (process_rows._cell("host"), 4)
    makers = [RowMaker("alice"), RowMaker("alice", lead=lead, key_prefix="0/")]
    checked = 0
    for tick in range(24):
        now = base.timestamp + tick
        snapshot = _moved(base, rng, now)
        for first, maker in enumerate(makers):
            rows = maker.rows(
                snapshot, only_gpu=None, sort_key=SORT_KEYS[tick % 8], reverse=False, job_of_pid={}
            )
            for row in rows:
                texts = _old_texts(row.process, now)
                shown = tuple(row.text(column) for column in range(3 + first, 9 + first))
                assert shown == texts, row.process
                assert row.widths[3 + first : 9 + first] == tuple(map(len, texts))
                checked += 1
    assert checked == 24 * 2 * 200


def test_a_size_shows_what_human_bytes_shows() -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        value = _size(rng)
        cell, width = process_rows._bytes_sized(value)
        text = NA if value is None else human_bytes(value)
        assert cell == ((text, ""),) and width == len(text), value
