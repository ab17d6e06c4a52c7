"""A machine with known holders, and a recorder that steps its frozen clock sample by sample."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gputop.core.history.recorder import Recorder, RecorderOptions
from gputop.core.history.retention import Retention
from gputop.core.history.store import open_for_recording
from gputop.core.history.writer import HistoryWriter
from gputop.core.model import GpuProcess, Snapshot
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.source import open_backend
from helpers.scenarios import minimal_gpu

GIB_MIB = 1024
MIB = 1024 * 1024
# Above the kernel's highest pid (2**22): never a live process of this machine.
ALICE_TRAIN, ALICE_EVAL, BOB_NOTEBOOK, CAROL_A, CAROL_B = (
    4300001,
    4300002,
    4300003,
    4300004,
    4300005,
)


def process(pid: int, user: str, memory_mib: float, sm: float, *cmd: str) -> dict[str, Any]:
    return {
        "pid": pid,
        "user": user,
        "cmd": list(cmd) or ["python", f"{user}.py"],
        "used_memory_mib": memory_mib,
        "sm_util": sm,
    }


def holders_scenario(path: Path) -> str:
    """Three cards: alice busy on 0 and 1, bob holding 10 GiB idle on 1, carol's two
    processes on 2 (one card, counted once). Each card (at 50 %) holds what its processes
    hold, and their SM % fit in its own (as a driver's do: fake/card_load.py)."""
    gpus = [
        minimal_gpu(
            uuid="GPU-11111111-aaaa-bbbb-cccc-000000000000",
            pci_bus_id="00000000:07:00.0",
            memory_used_mib=20 * GIB_MIB,
            processes=[process(ALICE_TRAIN, "alice", 20 * GIB_MIB, 50, "python", "train.py")],
        ),
        minimal_gpu(
            uuid="GPU-11111111-aaaa-bbbb-cccc-000000000001",
            pci_bus_id="00000000:08:00.0",
            memory_used_mib=14 * GIB_MIB,
            processes=[
                process(ALICE_EVAL, "alice", 4 * GIB_MIB, 30, "python", "eval.py"),
                process(BOB_NOTEBOOK, "bob", 10 * GIB_MIB, 0, "jupyter-lab"),
            ],
        ),
        minimal_gpu(
            uuid="GPU-11111111-aaaa-bbbb-cccc-000000000002",
            pci_bus_id="00000000:09:00.0",
            memory_used_mib=8 * GIB_MIB,
            processes=[
                process(CAROL_A, "carol", 2 * GIB_MIB, 30),
                process(CAROL_B, "carol", 6 * GIB_MIB, 20),
            ],
        ),
    ]
    document = {
        "description": "three cards, known holders",
        "driver_version": "550.127.05",
        "cuda_driver_version": 12040,
        "gpus": gpus,
    }
    path.write_text(json.dumps(document))
    return str(path)


class SteppedClock:
    """Samples a frozen-clock backend, moving its clock ``step_s`` before every sample."""

    def __init__(self, backend: NvmlBackend, step_s: float, start_s: float = 0.0) -> None:
        self.backend = backend
        self.step_s = step_s
        self.t = start_s

    def sample(self) -> Snapshot:
        self.t += self.step_s
        self.backend.nvml.set_time(self.t)
        return self.backend.sample()


def record_stepped(
    scenario: str,
    store: Path,
    samples: int,
    interval_s: float = 5.0,
    retention: Retention | None = None,
    start_s: float = 0.0,
    job_of: Callable[[GpuProcess], str | None] | None = None,
) -> Snapshot:
    """Record ``samples`` samples ``interval_s`` apart (scenario time) into ``store``;
    returns the last snapshot. ``job_of`` attributes processes to jobs, as ``gputop record``
    does with gputop.core.history.jobs.job_of_process."""
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": str(start_s)})
    connection = open_for_recording(store, [])
    try:
        clock = SteppedClock(backend, interval_s, start_s)
        last: list[Snapshot] = []

        def sample() -> Snapshot:
            last.append(clock.sample())
            return last[-1]

        options = RecorderOptions(
            interval_s=interval_s,
            retention=retention or Retention(),
            speed=1e9,  # no waiting: the clock is stepped
            max_samples=samples,
        )
        writer = HistoryWriter(connection, store, print, job_of=job_of)
        # batches timed on the stepped clock itself: no clock step here
        Recorder(sample, writer, options, print, clock=lambda: clock.t).run(threading.Event())
        return last[-1]
    finally:
        connection.close()
        backend.close()


def read_only(store: Path) -> sqlite3.Connection:
    from gputop.core.history.store import open_for_reading

    return open_for_reading(store)


def make_version_1(store: Path) -> None:
    """Turn a store of today into the shape gputop's history store had at version 1 (before
    clock_steps, claim_spans and the activity columns), its rows kept: what an older
    recorder left behind, for the migration tests."""
    from gputop.core.history.schema import ACTIVITY_COLUMNS

    make_version_2(store)
    connection = sqlite3.connect(store)
    try:
        connection.execute("DROP TABLE IF EXISTS clock_steps")
        connection.execute("DROP TABLE IF EXISTS claim_spans")
        for column in ACTIVITY_COLUMNS:
            connection.execute(f"ALTER TABLE gpu_samples DROP COLUMN {column}")
        connection.execute("PRAGMA user_version = 1")
        connection.commit()
    finally:
        connection.close()


def make_version_2(store: Path) -> None:
    """Turn a store of today into the shape it had at version 2 (before the Xids and health
    counters), its rows kept, for the migration tests."""
    connection = sqlite3.connect(store)
    try:
        for table in ("xid_events", "xid_processes", "health_counters"):
            connection.execute(f"DROP TABLE IF EXISTS {table}")
        connection.execute("PRAGMA user_version = 2")
        connection.commit()
    finally:
        connection.close()
