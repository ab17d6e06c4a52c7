"""Measuring what a running job uses, from its supervisor (docs/history.md).

The supervisor samples the cards through the backend every view uses and adds up, per card
the job is pinned to, its own processes there (those of its session): peak memory (the
driver's exact peak where accounting is on), mean SM use, GPU-seconds and the energy counter.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING

from gputop.core import settings
from gputop.core.clock_events import throttling
from gputop.core.jobs.model import Job
from gputop.core.jobs.store_rows import usage_measured
from gputop.core.jobs.usage import (
    MAX_BYTES,
    PEAK_FROM_ACCOUNTING,
    PEAK_FROM_SAMPLES,
    CardUsage,
    JobUsage,
)
from gputop.core.model import GpuSample, ProcessOrigin
from gputop.core.numbers import within
from gputop.core.private_files import StoreError
from gputop.core.process_control import session_of
from gputop.core.records import mutable
from gputop.core.sampling.nvml_usage import accounted_peak_bytes, accounting_on, energy_mj

if TYPE_CHECKING:
    from gputop.core.jobs.store import JobStore
    from gputop.core.model import GpuProcess
    from gputop.core.sampling.nvml_backend import NvmlBackend

FIRST_INTERVALS_S = (1.0, 1.0, 2.0)
"""The first samples of a run, one, two and four seconds in (a short job is measured too)."""
LONGEST_INTERVAL_S = 30.0
"""A longer gap between samples (a suspended machine, a stalled driver) counts as this
long (or three polls, if longer): time nobody saw is not counted as time on the card."""


@mutable(slots=True)
class _CardTally:
    physical_index: int
    uuid: str
    accounting: bool
    energy_first_mj: int | None
    energy_last_mj: int | None
    energy_before_mj: int = 0
    """Energy counted before the counter went back (a driver reload)."""
    peak_bytes: int | None = None
    sm_percent_seconds: float = 0.0
    sm_seconds: float = 0.0
    seconds: float = 0.0
    accounted: dict[int, int] = field(default_factory=dict)
    """The driver's peak for each of the job's pids seen there (accounting on)."""
    activity: list[float] = field(default_factory=lambda: [0.0] * 6)
    """GPM's SM active, tensor active, DRAM: percent-seconds and known seconds, each."""
    throttled_s: float | None = None

    def usage(self) -> CardUsage:
        exact = sum(self.accounted.values()) if self.accounted else None
        energy = None
        if self.energy_first_mj is not None and self.energy_last_mj is not None:
            used = self.energy_before_mj + self.energy_last_mj - self.energy_first_mj
            energy = max(0, used) / 1000.0
        return CardUsage(
            physical_index=self.physical_index,
            uuid=self.uuid,
            peak_memory_bytes=exact if exact is not None else self.peak_bytes,
            mean_sm_percent=(
                round(self.sm_percent_seconds / self.sm_seconds, 1) if self.sm_seconds else None
            ),
            gpu_seconds=round(self.seconds, 3),
            energy_j=None if energy is None else round(energy, 3),
            peak_from=PEAK_FROM_ACCOUNTING if exact is not None else PEAK_FROM_SAMPLES,
            mean_sm_active_percent=_mean(self.activity[0], self.activity[1]),
            mean_tensor_active_percent=_mean(self.activity[2], self.activity[3]),
            mean_dram_active_percent=_mean(self.activity[4], self.activity[5]),
            throttled_seconds=None if self.throttled_s is None else round(self.throttled_s, 3),
        )

    def add_activity(self, gpu: GpuSample, interval: float) -> None:
        figures = (
            gpu.activity.sm_active_percent,
            gpu.activity.tensor_active_percent,
            gpu.activity.dram_active_percent,
        )
        for position, value in enumerate(figures):
            if within(value, 0, 100):
                self.activity[2 * position] += float(value or 0.0) * interval
                self.activity[2 * position + 1] += interval
        if gpu.clock_event_mask is not None:
            held = interval if throttling(gpu.clock_event_mask) else 0.0
            self.throttled_s = (self.throttled_s or 0.0) + held


def _mean(total: float, seconds: float) -> float | None:
    return round(min(100.0, total / seconds), 1) if seconds > 0 else None


class UsageMeter:
    """Adds up one running job's use of its cards, one sample at a time."""

    def __init__(
        self,
        physical_indices: Sequence[int],
        uuids: Sequence[str],
        backend: NvmlBackend,
        poll_s: float,
        owns: Callable[[int], bool],
    ) -> None:
        """``owns(pid)``: whether a process is the job's."""
        self.poll_s = poll_s
        self._owns = owns
        self._backend = backend
        self._last = time.monotonic()
        self._samples = 0
        self._peak_total: int | None = None
        self.gpus: tuple[GpuSample, ...] = ()
        """The cards as last sampled: their health has the Xids (jobs/xid_marks.py)."""
        self._cards = []
        for position, index in enumerate(physical_indices):
            uuid = uuids[position] if position < len(uuids) else ""
            energy = energy_mj(backend, index)
            on = accounting_on(backend, index)
            self._cards.append(_CardTally(index, uuid, on, energy, energy))

    def sample(self) -> None:
        now = time.monotonic()
        interval = min(now - self._last, max(LONGEST_INTERVAL_S, 3 * self.poll_s))
        self._last = now
        snapshot = self._backend.sample()
        self.gpus = tuple(snapshot.gpus)
        by_index = {gpu.physical_index: gpu for gpu in snapshot.gpus}
        total: int | None = None
        for card in self._cards:
            gpu = by_index.get(card.physical_index)
            mine = [p for p in gpu.processes if self._is_job(p)] if gpu else []
            if gpu is not None and not gpu.lost:
                card.add_activity(gpu, interval)
            memory = self._count(card, mine, interval)
            if memory is not None:
                total = memory + (total or 0)
            self._read_energy(card)
        if total is not None:
            self._peak_total = max(total, self._peak_total or 0)
        self._samples += 1

    def finish(self) -> JobUsage:
        """The usage, the energy counters and the cards (their Xids) read once more."""
        for card in self._cards:
            self._read_energy(card)
        self.gpus = tuple(self._backend.sample().gpus)
        return self.usage()

    def usage(self) -> JobUsage:
        return JobUsage(
            per_card=tuple(card.usage() for card in self._cards),
            peak_memory_bytes=self._peak_total,
            samples=self._samples,
        )

    def close(self) -> None:
        self._backend.close()

    def _count(self, card: _CardTally, mine: list[GpuProcess], interval: float) -> int | None:
        """Add one sample of the job's processes on ``card``; their memory, if known."""
        if not mine:
            return None
        card.seconds += interval
        memories = [p.used_memory_bytes for p in mine if within(p.used_memory_bytes, 0, MAX_BYTES)]
        memory = sum(m for m in memories if m is not None) if memories else None
        if memory is not None:
            card.peak_bytes = max(memory, card.peak_bytes or 0)
        sms = [p.sm_util_percent for p in mine if within(p.sm_util_percent, 0, 100)]
        if sms:
            card.sm_percent_seconds += min(100, sum(s for s in sms if s is not None)) * interval
            card.sm_seconds += interval
        if card.accounting:
            for process in mine:
                peak = accounted_peak_bytes(self._backend, card.physical_index, process.pid)
                if peak is not None:
                    card.accounted[process.pid] = max(peak, card.accounted.get(process.pid, 0))
        return memory

    def _read_energy(self, card: _CardTally) -> None:
        if card.energy_first_mj is None:
            return
        now = energy_mj(self._backend, card.physical_index)
        if now is None or card.energy_last_mj is None:
            return
        if now < card.energy_last_mj:  # the counter started again (the driver reloaded)
            card.energy_before_mj += card.energy_last_mj - card.energy_first_mj
            card.energy_first_mj = 0
        card.energy_last_mj = now

    def _is_job(self, process: GpuProcess) -> bool:
        return process.origin is ProcessOrigin.HOST and self._owns(process.pid)


def open_meter(job: Job, environ: Mapping[str, str]) -> UsageMeter | None:
    """A meter for ``job`` on the GPUs it sees (``None``: no NVML, or no cards pinned)."""
    from gputop.core.sampling.nvml_backend import SamplingOptions
    from gputop.core.sampling.source import open_backend

    if not job.physical_indices:
        return None
    try:
        backend = open_backend(
            environ=environ,
            options=SamplingOptions(driver_probe=False, cuda_views=False, claims=False),
        )
    except Exception:  # GputopError, or a broken driver binding: it must not stop the job
        return None
    poll_s = settings.USAGE_POLL.or_default(environ)
    return UsageMeter(job.physical_indices, job.uuids, backend, poll_s, _owner(job))


def _owner(job: Job) -> Callable[[int], bool]:
    """Whether a process is ``job``'s: its own, or one in its session."""
    return lambda pid: (
        pid == job.pid or (job.session_id is not None and session_of(pid) == job.session_id)
    )


class UsageRecorder:
    """A supervisor's measuring: a sample when due, recorded after each (a write the store
    refuses is skipped: the next carries it), the total at the end."""

    def __init__(
        self, store: JobStore, job: Job, environ: Mapping[str, str], say: Callable[[str], None]
    ) -> None:
        self._store = store
        self._job_id = job.id
        self._say = say
        self._meter = open_meter(job, environ)
        self._sampled = time.monotonic()
        self._samples = 0
        self.gpus: tuple[GpuSample, ...] = ()
        """The cards as the meter last saw them, kept when it closes (for the end word)."""

    def _interval_s(self, meter: UsageMeter) -> float:
        if self._samples < len(FIRST_INTERVALS_S):
            return min(meter.poll_s, FIRST_INTERVALS_S[self._samples])
        return meter.poll_s

    @property
    def wait_s(self) -> float | None:
        """The longest the supervisor may wait for the next ``tick`` (None: no limit)."""
        return self._interval_s(self._meter) if self._meter is not None else None

    def tick(self) -> None:
        meter = self._meter
        if meter is None or time.monotonic() - self._sampled < self._interval_s(meter):
            return
        self._sampled = time.monotonic()
        self._samples += 1
        try:
            meter.sample()
        except Exception as error:  # measuring must never disturb the job it measures
            self._say(f"job {self._job_id}: stopped measuring its GPU use: {error}")
            self._meter = None
            meter.close()
            return
        with contextlib.suppress(StoreError):
            self._store.record(self._job_id, usage_measured(meter.usage()))

    def finish(self) -> JobUsage | None:
        """What the job used in all (``None``: not measured); measuring ends."""
        meter, self._meter = self._meter, None
        if meter is None:
            return None
        try:
            return meter.finish()
        except Exception:  # the last energy reading only: what was measured stands
            return meter.usage()
        finally:
            self.gpus = meter.gpus
            meter.close()
