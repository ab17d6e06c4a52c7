"""The newest sample, handed to every scrape: the exporter never samples per scrape.

The sampling loop (``sample_until``) reads every GPU once per interval through the one
sampler (gputop/core/sampling/) and gives the snapshot to ``SnapshotCollector``, which
prometheus_client asks for metrics at each scrape. The families of a snapshot are built at
the first scrape that sees it and kept for the next ones, so ten Prometheus servers
scraping cost one build per sample. See docs/exporter.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from gputop.core.exporter.families import Counts, snapshot_families
from gputop.core.exporter.jobs import JobLabels
from gputop.core.exporter.labels import CommandLabel
from gputop.core.exporter.processes import DEFAULT_TOP
from gputop.core.model import Snapshot
from gputop.core.process_jobs import ProcessJobs


class SnapshotCollector(Collector):
    """A prometheus_client collector over the newest snapshot the loop recorded."""

    def __init__(
        self,
        top: int = DEFAULT_TOP,
        command: CommandLabel = "redacted",
    ) -> None:
        self._top = top
        self._command: CommandLabel = command
        self._job_labels = JobLabels()
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._jobs: dict[int, ProcessJobs] = {}
        self._counts = Counts()
        self._families: list[Metric] | None = None
        self._generation = 0

    @property
    def generation(self) -> int:
        """Counts what changed the metrics (samples, failures): a page built for one
        generation is the page of any scrape until the next (http_server.PageCache)."""
        return self._generation

    def record(self, snapshot: Snapshot, duration_s: float) -> None:
        """A new sample (called by the sampling loop, never by a scrape)."""
        processes = [process for gpu in snapshot.gpus for process in gpu.processes]
        jobs = self._job_labels.refresh(processes)
        failed_gpus = sum(gpu.sample_error is not None for gpu in snapshot.gpus)
        with self._lock:
            self._snapshot = snapshot
            self._jobs = jobs
            self._counts = Counts(
                samples=self._counts.samples + 1,
                sampling_errors=self._counts.sampling_errors + failed_gpus,
                last_sample_duration_s=duration_s,
            )
            self._families = None
            self._generation += 1

    def record_failure(self) -> None:
        """A sample that failed as a whole: counted; the last good one is still served."""
        with self._lock:
            self._counts = replace(self._counts, sampling_errors=self._counts.sampling_errors + 1)
            self._families = None
            self._generation += 1

    @property
    def counts(self) -> Counts:
        with self._lock:
            return self._counts

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if self._snapshot is None:
                return iter(())
            if self._families is None:
                self._families = snapshot_families(
                    self._snapshot,
                    top=self._top,
                    jobs=self._jobs,
                    counts=self._counts,
                    command=self._command,
                )
            return iter(self._families)


def sample_once(sample: Callable[[], Snapshot], collector: SnapshotCollector) -> str | None:
    """Take one sample into ``collector``; what went wrong, for a person, if it failed."""
    started = time.monotonic()
    try:
        snapshot = sample()
    except Exception as error:  # a driver in trouble: keep serving the last sample, count it
        collector.record_failure()
        return f"a sample failed ({type(error).__name__}: {error}); retrying"
    collector.record(snapshot, time.monotonic() - started)
    return None


def sample_until(
    sample: Callable[[], Snapshot],
    collector: SnapshotCollector,
    interval_s: float,
    stop: threading.Event,
    report: Callable[[str], None],
    *,
    sampled_at: float | None = None,
) -> None:
    """Sample every ``interval_s`` until ``stop`` is set; a failure is counted, said once
    through ``report`` until a sample succeeds again, and retried at the next interval.
    ``sampled_at`` (``time.monotonic()``): a sample was just taken, the first waits for its
    interval to end."""
    said_failure = False
    if sampled_at is not None:
        stop.wait(max(0.0, interval_s - (time.monotonic() - sampled_at)))
    while not stop.is_set():
        started = time.monotonic()
        problem = sample_once(sample, collector)
        if problem is not None and not said_failure:
            report(problem)
        said_failure = problem is not None
        stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
