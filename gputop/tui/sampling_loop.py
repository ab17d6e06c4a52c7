"""The local dashboard's sampling loop: one sample per interval, and the jobs read with it.

It runs in the dashboard's sampling thread and knows nothing of Textual: each result goes to
a callback (``GputopApp`` posts it as a message), so it is tested without an app
(tests/unit/test_sampling_loop.py). A failing sample is delivered, never raised: the loop
goes on and samples again an interval later. The first sample may have been read while the
interface started (gputop.core.sampling.early): it is used first, and when the dashboard
already showed it (``show_first``), only the jobs read with it are news.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, field
from typing import Protocol

from gputop.core.errors import GputopError
from gputop.core.jobs.service import JobsService, JobsView
from gputop.core.jobs.store import JobStore
from gputop.core.model import Snapshot
from gputop.core.records import frozen, mutable
from gputop.core.sampling.early import EarlySample

STORE_RETRY_S = 5.0
"""How often the sampler tries again to open a job store it could not open (said once)."""


class SnapshotSource(Protocol):
    def sample(self) -> Snapshot: ...


class JobsReading(Protocol):
    """The jobs read with each sample, in the sampling thread (which opens and closes)."""

    def open(self) -> None: ...

    def read(self, snapshot: Snapshot) -> JobsView | None: ...

    def close(self) -> None: ...


@frozen(slots=False)
class Sampled:
    """A sample and the jobs read with it (None: not read). ``shown``: the dashboard already
    shows this sample (the first one): only its jobs are news."""

    snapshot: Snapshot
    jobs: JobsView | None
    shown: bool = False


@frozen(slots=False)
class SampleFailed:
    """Sampling raised: ``error`` says what (the loop goes on)."""

    error: str


@frozen(slots=False)
class JobsFailed:
    """Reading the jobs raised: said once, the first time; the samples go on without jobs."""

    error: str


Delivered = Sampled | SampleFailed | JobsFailed


@mutable(eq=False)
class SamplingLoop:
    """``run()`` samples until ``stop`` is set, delivering each result to ``deliver``."""

    backend: SnapshotSource
    _: KW_ONLY
    interval_s: float
    jobs: JobsReading
    stop: threading.Event
    deliver: Callable[[Delivered], None]
    first_sample: EarlySample | None = None
    clock: Callable[[], float] = time.monotonic
    _shown_first: Snapshot | None = field(default=None, init=False)

    def show_first(self) -> Snapshot | None:
        """Before ``run``, on the UI thread: the first sample if it is read already (it is
        then shown at once, and ``run`` delivers only its jobs); None if it is still being
        read (``run`` waits for it) or failed (``run`` samples again and says what fails)."""
        early = self.first_sample
        if early is None or not early.ready():
            return None
        self.first_sample = None
        try:
            snapshot = early.take()
        except Exception:
            return None
        self._shown_first = snapshot
        return snapshot

    def _next_sample(self) -> tuple[Snapshot, bool]:
        """The next sample, and whether it is already on screen (the first, shown)."""
        shown, self._shown_first = self._shown_first, None
        if shown is not None:
            return shown, True
        early, self.first_sample = self.first_sample, None
        return (early.take() if early is not None else self.backend.sample()), False

    def run(self) -> None:
        self.jobs.open()
        jobs_failed = False
        try:
            while not self.stop.is_set():
                started = self.clock()
                try:
                    snapshot, shown = self._next_sample()
                except GputopError as error:
                    self.deliver(SampleFailed(str(error)))
                except Exception as error:  # a bad sample must not kill the dashboard
                    self.deliver(SampleFailed(f"{type(error).__name__}: {error}"))
                else:
                    try:
                        jobs = self.jobs.read(snapshot)
                    except Exception as error:  # nor must a job store gone wrong (said once)
                        if not jobs_failed:
                            self.deliver(JobsFailed(f"{type(error).__name__}: {error}"))
                        jobs, jobs_failed = None, True
                    self.deliver(Sampled(snapshot, jobs, shown))
                self.stop.wait(max(0.0, self.interval_s - (self.clock() - started)))
        finally:
            self.jobs.close()


@mutable(eq=False)
class StoreJobs:
    """The jobs of the job store, with Slurm's view read first (it updates Slurm's jobs in
    the store). A store that cannot be opened is tried again every ``STORE_RETRY_S``."""

    service: JobsService
    read_slurm: Callable[[JobStore | None, Snapshot], None]
    clock: Callable[[], float] = time.monotonic
    _store: JobStore | None = field(default=None, init=False)
    _reopen_at: float = field(default=0.0, init=False)

    def open(self) -> None:
        self._store = self.service.open_store()
        self._reopen_at = self.clock() + STORE_RETRY_S

    def read(self, snapshot: Snapshot) -> JobsView | None:
        now = self.clock()
        if self._store is None and now >= self._reopen_at:  # unusable at first: try again
            self._store, self._reopen_at = self.service.open_store(), now + STORE_RETRY_S
        self.read_slurm(self._store, snapshot)
        return self.service.read(self._store, snapshot)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
