"""Who used the cards and who held them idle, from the history store.

For each holder (a user, a GPU, a job or a process) and each card it held, the samples of
the window are read in time order, once per sample and card (a user with three processes on
one card holds it once). From them:

- ``gpu_seconds``: the seconds it held a card, summed over cards;
- ``mean_memory_bytes`` and ``mean_sm_util``: time-weighted means while it held a card
  (its processes on one card added up; SM % capped at 100, unknown where NVML did not say);
- ``peak_memory_bytes``: the most it held on one card at once;
- ``idle_held_seconds``: the seconds of runs, each at least ``idle_min_s`` long, in which it
  held memory on a card while its SM % there stayed under 5.

Every figure is a sum of recorded samples, so it matches what was recorded within one
sample. Numbers read back from the store are checked (finite, not negative) before use.
See docs/history.md.
"""

from __future__ import annotations

import enum
import math
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

IDLE_SM_PERCENT = 5.0
DEFAULT_IDLE_MIN_S = 30 * 60.0


class ReportBy(str, enum.Enum):
    USER = "user"
    GPU = "gpu"
    JOB = "job"
    PROCESS = "process"


_HOLDER = {
    ReportBy.USER: "COALESCE(users.text, '?')",
    ReportBy.GPU: "p.physical_index",
    ReportBy.JOB: "r.job",
    ReportBy.PROCESS: "r.id",
}


@dataclass(frozen=True, slots=True)
class ReportQuery:
    since: float
    until: float
    by: ReportBy = ReportBy.USER
    idle_min_s: float = DEFAULT_IDLE_MIN_S


@dataclass(frozen=True, slots=True)
class ReportRow:
    key: str | int
    """The user name, the GPU's physical index, the job, or the pid."""
    gpu_seconds: float
    idle_held_seconds: float
    mean_memory_bytes: int | None
    peak_memory_bytes: int | None
    mean_sm_util: float | None
    user: str | None = None
    """For ``--by process``: whose it was, and its command (cleaned when recorded)."""
    command: str | None = None
    start_time: float | None = None

    @property
    def idle(self) -> bool:
        return self.idle_held_seconds > 0


class _Holder:
    """What is summed for one holder while its samples are read."""

    def __init__(self) -> None:
        self.gpu_seconds = 0.0
        self.idle_s = 0.0
        self.memory_sum = 0.0
        self.memory_weight = 0.0
        self.sm_sum = 0.0
        self.sm_weight = 0.0
        self.peak: int | None = None
        self.run_s = 0.0
        self.run_end: int | None = None
        """The rank of the run's last sample: a run goes on only in the next sample."""
        self.run_card: int | None = None

    def add(
        self,
        rank: int,
        held: float,
        card: int,
        memory: float | None,
        peak: float | None,
        sm: float | None,
        idle_min_s: float,
    ) -> None:
        self.gpu_seconds += held
        if memory is not None:
            self.memory_sum += memory * held
            self.memory_weight += held
        if sm is not None:
            self.sm_sum += min(sm, 100.0) * held
            self.sm_weight += held
        top = peak if peak is not None else memory
        if top is not None and (self.peak is None or top > self.peak):
            self.peak = int(top)
        idle = sm is not None and sm < IDLE_SM_PERCENT and (memory is None or memory > 0)
        if not idle or self.run_card != card or self.run_end != rank - 1:
            self.end_run(idle_min_s)
        if idle:
            self.run_s += held
            self.run_end = rank
            self.run_card = card

    def end_run(self, idle_min_s: float) -> None:
        if self.run_s >= idle_min_s:
            self.idle_s += self.run_s
        self.run_s = 0.0
        self.run_end = None
        self.run_card = None


def build_report(connection: sqlite3.Connection, query: ReportQuery) -> list[ReportRow]:
    """The rows of the report, idle holders first, then by GPU time."""
    holder = _HOLDER[query.by]
    only_jobs = "AND r.job IS NOT NULL" if query.by is ReportBy.JOB else ""
    rows = connection.execute(
        f"SELECT {holder} AS holder, p.physical_index, s.id, "
        "MAX(COALESCE(p.held_s, s.duration_s)), SUM(p.memory_bytes), "
        "SUM(COALESCE(p.peak_memory_bytes, p.memory_bytes)), MIN(100.0, SUM(p.sm_util_percent)) "
        "FROM samples s JOIN process_samples p ON p.sample_id = s.id "
        "JOIN processes r ON r.id = p.process_id "
        "LEFT JOIN strings users ON users.id = r.user_id "
        f"WHERE s.t >= ? AND s.t < ? {only_jobs} "
        "GROUP BY s.id, p.physical_index, holder "
        "ORDER BY holder, p.physical_index, s.t, s.id",
        (query.since, query.until),
    )
    ranks = _sample_ranks(connection, query)
    holders: dict[str | int, _Holder] = {}
    for key, card, sample_id, held, memory, peak, sm in rows:
        held_s = _measure(held)
        if held_s is None or not isinstance(card, int):
            continue  # a damaged row: nothing to count
        summed = holders.get(key)
        if summed is None:
            summed = holders[key] = _Holder()
        summed.add(
            ranks[sample_id],
            held_s,
            card,
            _measure(memory),
            _measure(peak),
            _measure(sm),
            query.idle_min_s,
        )
    result = [_row(key, summed, query.idle_min_s) for key, summed in holders.items()]
    if query.by is ReportBy.PROCESS:
        result = list(_with_process_facts(connection, result))
    return sorted(result, key=lambda row: (-row.idle_held_seconds, -row.gpu_seconds, str(row.key)))


def _sample_ranks(connection: sqlite3.Connection, query: ReportQuery) -> dict[int, int]:
    """Each sample of the window by its place in time: an idle run goes on from one sample
    to the next recorded one (a stopped recorder pauses a run; it does not end it)."""
    found = connection.execute(
        "SELECT id FROM samples WHERE t >= ? AND t < ? ORDER BY t, id",
        (query.since, query.until),
    )
    return {int(sample_id): rank for rank, (sample_id,) in enumerate(found)}


def _measure(value: object) -> float | None:
    """A number read back from the store: finite and not negative, else unknown."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _row(key: str | int, summed: _Holder, idle_min_s: float) -> ReportRow:
    summed.end_run(idle_min_s)
    return ReportRow(
        key=key,
        gpu_seconds=summed.gpu_seconds,
        idle_held_seconds=summed.idle_s,
        mean_memory_bytes=round(summed.memory_sum / summed.memory_weight)
        if summed.memory_weight
        else None,
        peak_memory_bytes=summed.peak,
        mean_sm_util=summed.sm_sum / summed.sm_weight if summed.sm_weight else None,
    )


def _with_process_facts(
    connection: sqlite3.Connection, rows: list[ReportRow]
) -> Iterable[ReportRow]:
    """``--by process``: the key becomes the pid, with the process's user and command."""
    for row in rows:
        found = connection.execute(
            "SELECT r.pid, r.start_time, users.text, commands.text FROM processes r "
            "LEFT JOIN strings users ON users.id = r.user_id "
            "LEFT JOIN strings commands ON commands.id = r.command_id WHERE r.id = ?",
            (row.key,),
        ).fetchone()
        if found is None:
            continue
        pid, start_time, user, command = found
        yield ReportRow(
            key=int(pid),
            gpu_seconds=row.gpu_seconds,
            idle_held_seconds=row.idle_held_seconds,
            mean_memory_bytes=row.mean_memory_bytes,
            peak_memory_bytes=row.peak_memory_bytes,
            mean_sm_util=row.mean_sm_util,
            user=user,
            command=command,
            start_time=_measure(start_time),
        )
