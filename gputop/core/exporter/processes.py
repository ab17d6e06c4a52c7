"""Each GPU's processes as the exporter counts them: the top N apart, the rest summed.

A series per process would let one busy server (thousands of short-lived workers) flood a
Prometheus server: each GPU exports at most ``top`` processes, the largest by memory (then
by SM %), and the others as one sum and a count. Users are summed over every process, kept
or not, so the per-user figures stay exact. A process idle by the history report's rule
(``is_idle``: SM % known and under 5 while it holds memory) holds that memory idle, at one
instant. See docs/exporter.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field

from gputop.core.history.spans import is_idle
from gputop.core.model import GpuProcess, GpuSample
from gputop.core.records import frozen, mutable

DEFAULT_TOP = 20
MAX_TOP = 1000


@frozen
class ProcessUse:
    """One process on one GPU (NVML's entries for the same pid on a card added up)."""

    process: GpuProcess
    memory_used_bytes: int | None
    sm_util_percent: int | None

    @property
    def idle_held_bytes(self) -> int:
        """Memory this process holds while its SM % is known and under the idle bound."""
        held = self.memory_used_bytes
        return held or 0 if is_idle(held, self.sm_util_percent) else 0


@frozen
class GpuProcesses:
    """What the exporter says about one GPU's processes."""

    top: tuple[ProcessUse, ...]
    other_count: int
    other_memory_bytes: int
    other_sm_percent: int
    idle_held_bytes: int


@mutable(slots=True)
class UserTotals:
    memory_used_bytes: int = 0
    idle_held_bytes: int = 0
    pids: set[int] = field(default_factory=set)
    gpus: set[int] = field(default_factory=set)


def process_uses(gpu: GpuSample) -> list[ProcessUse]:
    """The GPU's processes, one per pid, largest first."""
    merged: dict[int, ProcessUse] = {}
    for process in gpu.processes:
        seen = merged.get(process.pid)
        if seen is None:
            merged[process.pid] = ProcessUse(
                process, process.used_memory_bytes, process.sm_util_percent
            )
        else:
            merged[process.pid] = ProcessUse(
                seen.process,
                _add(seen.memory_used_bytes, process.used_memory_bytes),
                _add(seen.sm_util_percent, process.sm_util_percent),
            )
    return sorted(
        merged.values(),
        key=lambda use: (
            -(use.memory_used_bytes or 0),
            -(use.sm_util_percent or 0),
            use.process.pid,
        ),
    )


def bound_processes(uses: list[ProcessUse], top: int) -> GpuProcesses:
    """The first ``top`` of ``uses`` kept; the others summed and counted."""
    kept, rest = uses[:top], uses[top:]
    return GpuProcesses(
        top=tuple(kept),
        other_count=len(rest),
        other_memory_bytes=sum(use.memory_used_bytes or 0 for use in rest),
        other_sm_percent=sum(use.sm_util_percent or 0 for use in rest),
        idle_held_bytes=sum(use.idle_held_bytes for use in uses),
    )


def user_totals(per_gpu: Iterable[tuple[int, list[ProcessUse]]]) -> dict[str, UserTotals]:
    """Every process's user (``""`` when unknown) with what their processes hold."""
    totals: dict[str, UserTotals] = {}
    for physical_index, uses in per_gpu:
        for use in uses:
            user = use.process.user or ""
            total = totals.setdefault(user, UserTotals())
            total.memory_used_bytes += use.memory_used_bytes or 0
            total.idle_held_bytes += use.idle_held_bytes
            total.pids.add(use.process.pid)
            total.gpus.add(physical_index)
    return totals


def _add(first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    if second is None:
        return first
    return first + second
