"""One host's line in the lab dashboard: its state, free cards, memory free, busiest user.

Free cards are judged by the same free-card policy as ``gputop pick`` (gputop/core/jobs/
policy.py), with the host's own account as "you" and its own active gputop jobs, so the
summary never promises a card that ``pick --hosts`` would refuse. See docs/lab.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from gputop.core.free_cards import FreePolicy, judge_cards
from gputop.core.records import frozen
from gputop.core.remote.agent_version import lacks
from gputop.core.remote.status import HostStatus, LinkState, Mode

ACTIVE_JOB_STATUSES = ("waiting", "running")


@frozen(slots=False)
class HostSummary:
    host: str
    """Untrusted text: cleaned before it is drawn."""
    state_text: str
    """``live``, ``stale for 12 s``, ``unreachable: why``, with ``reduced mode`` where so."""
    healthy: bool
    """Live (or local) with data: drawn plainly; anything else is drawn as a warning."""
    gpu_count: int
    free_cards: int
    memory_free_bytes: int | None
    memory_total_bytes: int | None
    busiest_user: str | None
    """The user holding the most GPU memory on the host (untrusted text)."""


def active_job_gpus(jobs: Sequence[Mapping[str, Any]] | None) -> dict[int, tuple[int, ...]]:
    """``{job id: physical indices}`` of the host's waiting and running gputop jobs."""
    active: dict[int, tuple[int, ...]] = {}
    for job in jobs or ():
        if not isinstance(job, Mapping) or job.get("status") not in ACTIVE_JOB_STATUSES:
            continue
        try:
            active[int(job["id"])] = tuple(int(i) for i in job.get("gpus") or ())
        except (KeyError, TypeError, ValueError):
            continue  # a malformed record from a newer or broken agent: not a claim
    return active


def short_state(status: HostStatus) -> str:
    """The state in a few words for a one-line summary (the full reason is in the notice)."""
    if status.state is LinkState.STALE:
        text = f"stale for {status.stale_for_s or 0:.0f} s"
    elif status.state is LinkState.UNREACHABLE:
        reason = status.failure.reason if status.failure else "not reachable"
        text = f"unreachable: {reason}"
    else:
        text = status.state.value
    if status.mode is Mode.REDUCED and status.state is not LinkState.UNREACHABLE:
        text += ", reduced mode"
    elif (
        status.state is not LinkState.UNREACHABLE and lacks(status.agent_version or "") is not None
    ):
        text += ", older gputop"
    trouble = status.trouble()
    return f"{text}, {trouble}" if trouble else text


def summarize(status: HostStatus, policy: FreePolicy, local_user: str) -> HostSummary:
    snapshot = status.snapshot
    user = local_user if status.mode is Mode.LOCAL else (status.user or "")
    healthy = status.state is LinkState.LIVE and snapshot is not None and not status.trouble()
    if snapshot is None:
        return HostSummary(status.host, short_state(status), healthy, 0, 0, None, None, None)
    verdicts = judge_cards(snapshot, policy, user, active_job_gpus(status.jobs))
    free_bytes = [g.memory_free_bytes for g in snapshot.gpus if g.memory_free_bytes is not None]
    total_bytes = [g.memory_total_bytes for g in snapshot.gpus if g.memory_total_bytes is not None]
    memory_by_user: Counter[str] = Counter()
    for gpu in snapshot.gpus:
        for process in gpu.processes:
            if process.user:
                memory_by_user[process.user] += process.used_memory_bytes or 0
    busiest = memory_by_user.most_common(1)[0][0] if memory_by_user else None
    return HostSummary(
        host=status.host,
        state_text=short_state(status),
        healthy=healthy,
        gpu_count=len(snapshot.gpus),
        free_cards=sum(1 for verdict in verdicts if verdict.free),
        memory_free_bytes=sum(free_bytes) if free_bytes else None,
        memory_total_bytes=sum(total_bytes) if total_bytes else None,
        busiest_user=busiest,
    )
