"""Recording health into the history store from the simulated driver: a storm of Xid 13
and the card's own process, its clock stepped by the test (tests/unit/test_history_health.py,
test_job_xid_marks.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gputop.core.fake import FakeNvml
from gputop.core.history.store import open_for_recording
from gputop.core.history.writer import HistoryWriter
from gputop.core.model import Snapshot
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.source import open_backend
from helpers.history import process
from helpers.scenarios import minimal_gpu
from helpers.waiting import wait_for

WriteScenario = Callable[..., str]
EPOCH = 1767225600.0  # the scenarios' time 0: 2026-01-01T00:00:00Z, a whole minute
STORM_PID = 4300101
STORM_UUID = minimal_gpu()["uuid"]


def open_fake(path: str, at_s: float) -> tuple[FakeNvml, NvmlBackend]:
    """The simulated machine as ``gputop record --fake`` samples it, its clock frozen."""
    backend = open_backend(path, environ={"GPUTOP_FAKE_TIME": str(at_s)})
    assert isinstance(backend, NvmlBackend) and isinstance(backend.nvml, FakeNvml)
    return backend.nvml, backend


def write(writer: HistoryWriter, snapshot: Snapshot) -> None:
    writer.add(snapshot, 5.0)
    assert writer.flush()


def storm_scenario(scenario_file: WriteScenario) -> str:
    return scenario_file(
        [
            minimal_gpu(
                xid_events=[{"at_s": 1, "xid": 13, "count": 10000}],
                processes=[process(STORM_PID, "mallory", 1024, 90, "python", "bad_kernel.py")],
            )
        ]
    )


def record_storm(scenario_file: WriteScenario, store: Path) -> dict[int, int]:
    """Record a storm of Xid 13 over four minutes, with more runs of 13 and 31 between two
    samples than a card keeps as events; returns the counts the card gave."""
    nvml, backend = open_fake(storm_scenario(scenario_file), at_s=30.0)
    writer = HistoryWriter(open_for_recording(store, []), store, print)

    def counted(expected: dict[int, int]) -> Snapshot | None:
        snapshot = backend.sample()
        health = snapshot.gpus[0].health
        return snapshot if health and dict(health.xid_counts) == expected else None

    try:
        expected = {13: 10000}
        write(writer, wait_for(lambda: counted(expected), "the storm counted"))
        for step in range(1, 7):
            nvml.set_time(30.0 + 30.0 * step)
            nvml.inject_xid(0, 13, count=5000)
            expected[13] += 5000
            if step == 3:  # 80 runs between two samples: the events keep 32
                for _ in range(40):
                    nvml.inject_xid(0, 31)
                    nvml.inject_xid(0, 13)
                expected[13] += 40
                expected[31] = 40
            write(writer, wait_for(lambda: counted(expected), f"step {step} counted"))
    finally:
        backend.close()
        assert writer.connection is not None
        writer.connection.close()
    return expected
