"""The recorder and a wall clock that steps (docs/history.md, docs/faults.md).

Batches are timed on a clock nobody can set, so a wall clock stepped back a day (an NTP
correction, a restored VM) or forward an hour loses nothing: every sample is stored, each
with the time the wall clock gave it, and each step is said once and kept as a marker.
Before, the recorder compared the wall-clock sample times with its last write: after a step
back nothing was written until the clock caught up, and of 2,000 samples 739 were stored.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from helpers.history import holders_scenario, make_version_1

from gputop.core.history.recorder import Recorder, RecorderOptions
from gputop.core.history.schema import SCHEMA_VERSION
from gputop.core.history.store import open_for_recording
from gputop.core.history.writer import HistoryWriter
from gputop.core.model import Snapshot
from gputop.core.sampling.source import open_backend
from gputop.core.units import duration

SAMPLES = 2000
INTERVAL_S = 5.0
BACK_AT, FORWARD_AT = 700, 1400
DAY, HOUR = 86400.0, 3600.0
START = 1.8e9


class SteppedWall:
    """One simulated machine whose wall clock reads ``wall(n)`` at its n-th sample, while
    the clock nobody can set moves one interval a sample; records into an open store."""

    def __init__(self, tmp_path: Path, wall: Callable[[int], float]) -> None:
        self.backend = open_backend(holders_scenario(tmp_path / "s.json"), environ={})
        self.base = self.backend.sample()
        self.wall = wall
        self.times: list[float] = []
        """The wall clock's time of each sample taken."""
        self.steady = 0.0

    def sample(self) -> Snapshot:
        self.steady += INTERVAL_S
        self.times.append(self.wall(len(self.times)))
        return dataclasses.replace(self.base, timestamp=self.times[-1])

    def record(
        self, connection: sqlite3.Connection, store: Path, samples: int, say: Callable[[str], None]
    ) -> int:
        writer = HistoryWriter(connection, store, say)
        options = RecorderOptions(interval_s=INTERVAL_S, speed=1e9, max_samples=samples)
        recorder = Recorder(self.sample, writer, options, say, clock=lambda: self.steady)
        return recorder.run(threading.Event())


def _raw_times(connection: sqlite3.Connection) -> list[float]:
    rows = connection.execute("SELECT t FROM samples WHERE resolution_s = 0 ORDER BY t")
    return [row[0] for row in rows]


def test_a_clock_stepped_back_a_day_and_forward_an_hour_loses_no_sample(
    tmp_path: Path,
) -> None:
    store = tmp_path / "state" / "history.sqlite3"
    said: list[str] = []

    def wall(n: int) -> float:
        return (
            START + n * INTERVAL_S - (DAY if n >= BACK_AT else 0) + (HOUR if n >= FORWARD_AT else 0)
        )

    machine = SteppedWall(tmp_path, wall)
    connection = open_for_recording(store, [])
    try:
        assert machine.record(connection, store, SAMPLES, said.append) == SAMPLES
        stored = [row[0] for row in connection.execute("SELECT t FROM samples ORDER BY id")]
        steps = connection.execute("SELECT t, step_s FROM clock_steps ORDER BY t").fetchall()
    finally:
        connection.close()
        machine.backend.close()
    wall_times = machine.times

    assert stored == wall_times  # every sample, each with the time the clock gave it
    assert sorted(steps) == sorted([(wall_times[BACK_AT], -DAY), (wall_times[FORWARD_AT], HOUR)])
    back = [text for text in said if "stepped back" in text]
    forward = [text for text in said if "stepped forward" in text]
    assert len(back) == 1 and f"back by {duration(DAY)} " in back[0]
    assert len(forward) == 1 and f"forward by {duration(HOUR)} " in forward[0]


def test_jitter_is_no_step(tmp_path: Path) -> None:
    """A busy machine's late samples (the wall clock and the steady one agree) say nothing."""
    store = tmp_path / "h.sqlite3"
    backend = open_backend(holders_scenario(tmp_path / "s.json"), environ={})
    base = backend.sample()
    said: list[str] = []
    clock = [0.0]

    def sample() -> Snapshot:
        clock[0] += INTERVAL_S * (1 if len(said) % 2 else 7)  # late now and then
        return dataclasses.replace(base, timestamp=START + clock[0])

    connection = open_for_recording(store, [])
    try:
        writer = HistoryWriter(connection, store, said.append)
        options = RecorderOptions(interval_s=INTERVAL_S, speed=1e9, max_samples=50)
        Recorder(sample, writer, options, said.append, clock=lambda: clock[0]).run(
            threading.Event()
        )
        assert connection.execute("SELECT COUNT(*) FROM clock_steps").fetchone()[0] == 0
        assert connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 50
    finally:
        connection.close()
        backend.close()
    assert not [text for text in said if "stepped" in text]


def test_a_store_of_version_1_is_migrated_keeping_its_samples(tmp_path: Path) -> None:
    store = tmp_path / "h.sqlite3"
    connection = open_for_recording(store, [])
    connection.execute("INSERT INTO samples (t, duration_s, resolution_s) VALUES (1, 5, 0)")
    connection.close()
    make_version_1(store)
    again = open_for_recording(store, [])
    try:
        assert again.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert again.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 1
        assert again.execute("SELECT COUNT(*) FROM clock_steps").fetchone()[0] == 0
    finally:
        again.close()


def test_a_clock_stepped_forward_two_years_rolls_up_and_deletes_nothing(tmp_path: Path) -> None:
    """Roll-ups are due by the time the machine really counted, never by a wall clock stepped
    forward (a restored VM, a bad RTC): before, a step forward of two years, ten minutes
    long, rolled every raw sample into hours and then deleted them all as a year old."""
    store = tmp_path / "h.sqlite3"
    said: list[str] = []
    ahead_from, ahead_to = 300, 600  # 25 minutes on a clock two years ahead
    machine = SteppedWall(
        tmp_path,
        lambda n: START + n * INTERVAL_S + (2 * 365 * DAY if ahead_from <= n < ahead_to else 0),
    )
    connection = open_for_recording(store, [])
    try:
        machine.record(connection, store, 900, said.append)
        raw = _raw_times(connection)
    finally:
        connection.close()
        machine.backend.close()
    wall_times = machine.times
    assert raw == sorted(wall_times)  # every sample, at full resolution
    assert len([text for text in said if "stepped forward" in text]) == 1
    assert len([text for text in said if "stepped back" in text]) == 1


def test_a_clock_stepping_at_every_sample_is_kept_but_not_said_every_time(
    tmp_path: Path,
) -> None:
    """A broken clock flipping a day back and forth at every sample: every sample and every
    step stored, but stderr is not flooded (a line every 5 s, day and night, before)."""
    store = tmp_path / "h.sqlite3"
    said: list[str] = []
    machine = SteppedWall(tmp_path, lambda n: START + n * INTERVAL_S - (DAY if n % 2 else 0.0))
    connection = open_for_recording(store, [])
    try:
        machine.record(connection, store, 200, said.append)
        stored = [row[0] for row in connection.execute("SELECT t FROM samples ORDER BY id")]
        steps = connection.execute("SELECT COUNT(*) FROM clock_steps").fetchone()[0]
    finally:
        connection.close()
        machine.backend.close()
    wall_times = machine.times
    assert stored == wall_times and steps == 199
    stepped = [text for text in said if "stepped" in text]
    assert 1 <= len(stepped) <= 11, len(stepped)
    assert "not said" in stepped[-1] and "clock_steps" in stepped[-1]


def test_a_recorder_started_on_a_clock_years_ahead_deletes_nothing(tmp_path: Path) -> None:
    """A machine booted with its clock two years ahead starts the recorder before NTP sets
    it right: the first roll-up waits ten minutes on the clock nobody can set, so the
    stored history is judged by the corrected clock (before: the first sample's roll-up
    deleted every sample stored before as a year old)."""
    store = tmp_path / "h.sqlite3"
    ahead_until = [0]
    machine = SteppedWall(
        tmp_path,
        lambda n: START + n * INTERVAL_S + (2 * 365 * DAY if n < ahead_until[0] else 0.0),
    )
    connection = open_for_recording(store, [])
    try:
        for samples, ahead in ((100, 0), (200, 100 + 25)):  # two runs of the recorder
            ahead_until[0] = ahead
            machine.record(connection, store, samples, print)
        raw = _raw_times(connection)
    finally:
        connection.close()
        machine.backend.close()
    assert raw == sorted(machine.times)
