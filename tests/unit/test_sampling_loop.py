"""The local dashboard's sampling loop (gputop/tui/sampling_loop.py), without an app.

The loop runs in a thread of the test; what it delivers is collected, and the tests wait for
conditions (helpers.waiting.wait_for), never for fixed times.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from helpers.waiting import wait_for

from gputop.core.errors import GputopError
from gputop.core.jobs.service import JobsView
from gputop.core.model import Snapshot
from gputop.core.sampling.early import EarlySample
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.source import open_backend
from gputop.tui.sampling_loop import (
    Delivered,
    JobsFailed,
    Sampled,
    SampleFailed,
    SamplingLoop,
    SnapshotSource,
)

LONG_S = 3600.0
"""An interval no test outlasts: the loop samples once, then waits for ``stop``."""


@pytest.fixture
def backend() -> Iterator[NvmlBackend]:
    opened = open_backend("v100x4", environ={"GPUTOP_FAKE_TIME": "30"})
    yield opened
    opened.close()


class NoJobs:
    """Jobs read as nothing; records what the loop asked."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.opened = self.closed = False
        self.read_for: list[Snapshot] = []

    def open(self) -> None:
        self.opened = True

    def read(self, snapshot: Snapshot) -> JobsView | None:
        self.read_for.append(snapshot)
        if self.error is not None:
            raise self.error
        return None

    def close(self) -> None:
        self.closed = True


class Running:
    """A loop running in a thread, and what it delivered."""

    def __init__(self, loop: SamplingLoop, delivered: list[Delivered]) -> None:
        self.loop = loop
        self.delivered = delivered
        self.thread = threading.Thread(target=loop.run, daemon=True)

    def start(self) -> Running:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.loop.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the loop did not stop when asked"


def make_loop(
    backend: SnapshotSource,
    interval_s: float = LONG_S,
    jobs: NoJobs | None = None,
    first_sample: EarlySample | None = None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Running:
    delivered: list[Delivered] = []
    loop = SamplingLoop(
        backend,
        interval_s=interval_s,
        jobs=jobs or NoJobs(),
        stop=stop or threading.Event(),
        deliver=delivered.append,
        first_sample=first_sample,
        clock=clock,
    )
    return Running(loop, delivered)


def at(timestamp: float) -> Snapshot:
    """A snapshot of no GPU at ``timestamp``."""
    return Snapshot(
        host="test",
        driver_version=None,
        cuda_driver_version=None,
        nvml_version=None,
        timestamp=timestamp,
        gpus=(),
    )


class Scripted:
    """A backend whose samples are ``backend``'s, after ``before`` runs (it may raise)."""

    def __init__(self, backend: NvmlBackend, before: Callable[[], None]) -> None:
        self.backend = backend
        self.before = before

    def sample(self) -> Snapshot:
        self.before()
        return self.backend.sample()


def samples(running: Running) -> list[Sampled]:
    return [d for d in running.delivered if isinstance(d, Sampled)]


def test_samples_are_delivered_one_per_interval_and_the_jobs_are_read_with_each(
    backend: NvmlBackend,
) -> None:
    jobs = NoJobs()
    running = make_loop(backend, interval_s=0.01, jobs=jobs).start()
    wait_for(lambda: len(samples(running)) >= 3, "three samples")
    running.stop()
    assert jobs.opened and jobs.closed
    got = samples(running)
    assert all(not s.shown and len(s.snapshot.gpus) == 4 for s in got)
    assert jobs.read_for[: len(got)] == [s.snapshot for s in got]


class RecordedStop(threading.Event):
    """A stop event that records each wait and never blocks: the loop's pace, counted."""

    def __init__(self, waits_before_stop: int) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.left = waits_before_stop

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout if timeout is not None else -1.0)
        self.left -= 1
        if self.left <= 0:
            self.set()
        return self.is_set()


def test_the_wait_is_the_interval_less_the_time_the_sample_took() -> None:
    now = [100.0]

    class Slow:
        """Each sample takes 0.3 s of the fake clock, then 1.5 s (longer than the interval)."""

        def __init__(self) -> None:
            self.took = iter([0.3, 1.5, 0.0])

        def sample(self) -> Snapshot:
            now[0] += next(self.took)
            return at(now[0])

    stop = RecordedStop(waits_before_stop=3)
    running = make_loop(Slow(), interval_s=1.0, stop=stop, clock=lambda: now[0])
    running.loop.run()  # in this thread: the stop event never blocks
    assert stop.waits == pytest.approx([0.7, 0.0, 1.0])
    assert len(samples(running)) == 3


def test_the_loop_stops_promptly_when_asked_in_a_long_wait(backend: NvmlBackend) -> None:
    running = make_loop(backend, interval_s=LONG_S).start()
    wait_for(lambda: samples(running), "the first sample")
    running.stop()  # asserts the thread ended, long before the interval
    assert len(samples(running)) == 1


def test_a_failing_backend_is_reported_and_the_loop_goes_on() -> None:
    class Flaky:
        def __init__(self) -> None:
            self.calls = 0

        def sample(self) -> Snapshot:
            self.calls += 1
            if self.calls == 1:
                raise GputopError("NVML went away")
            if self.calls == 2:
                raise ValueError("bad reading")
            return at(1.0)

    running = make_loop(Flaky(), interval_s=0.01).start()
    wait_for(lambda: samples(running), "a sample after the failures")
    running.stop()
    failures = [d for d in running.delivered if isinstance(d, SampleFailed)]
    assert [f.error for f in failures] == ["NVML went away", "ValueError: bad reading"]
    assert running.thread is not None and not running.thread.is_alive()


def test_jobs_that_fail_are_said_once_and_the_samples_go_on_without_them(
    backend: NvmlBackend,
) -> None:
    running = make_loop(backend, interval_s=0.01, jobs=NoJobs(OSError("disk gone"))).start()
    wait_for(lambda: len(samples(running)) >= 3, "three samples")
    running.stop()
    said = [d for d in running.delivered if isinstance(d, JobsFailed)]
    assert said == [JobsFailed("OSError: disk gone")]
    assert all(s.jobs is None for s in samples(running))


def test_a_first_sample_shown_at_once_is_delivered_as_shown_and_not_read_again(
    backend: NvmlBackend,
) -> None:
    early = EarlySample.start(backend)
    early.wait()
    calls: list[int] = []
    running = make_loop(Scripted(backend, lambda: calls.append(1)), first_sample=early)
    first = running.loop.show_first()
    assert first is not None
    running.start()
    wait_for(lambda: samples(running), "the first delivery")
    running.stop()
    assert samples(running)[0] == Sampled(first, None, shown=True)
    assert not calls  # the backend was not asked again within the interval


def test_a_first_sample_still_being_read_is_waited_for_and_used_first(
    backend: NvmlBackend,
) -> None:
    release = threading.Event()
    calls: list[int] = []

    def slow() -> None:
        calls.append(1)
        release.wait(10)

    scripted = Scripted(backend, slow)
    early = EarlySample.start(scripted)  # type: ignore[arg-type]
    running = make_loop(scripted, first_sample=early)
    assert running.loop.show_first() is None  # not ready: the loop takes it over
    running.start()
    release.set()
    wait_for(lambda: samples(running), "the first sample")
    running.stop()
    assert not samples(running)[0].shown
    assert len(calls) == 1  # the early sample, not a second read


def test_a_first_sample_that_failed_is_not_shown_and_the_loop_samples_again(
    backend: NvmlBackend,
) -> None:
    failures = iter([GputopError("NVML went away")])

    def flaky() -> None:
        for error in failures:
            raise error

    scripted = Scripted(backend, flaky)
    early = EarlySample.start(scripted)  # type: ignore[arg-type]
    early.wait()
    running = make_loop(scripted, first_sample=early)
    assert running.loop.show_first() is None
    running.start()
    wait_for(lambda: samples(running), "a sample read again")
    running.stop()
    assert not [d for d in running.delivered if isinstance(d, SampleFailed)]
