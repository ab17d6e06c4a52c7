"""The mark of a gputop job whose cards had an Xid while it ran (docs/health.md).

From the history store (history/job_xids.py) or a dashboard's live health; the mark is the
most severe code and how many others (``✖ Xid 79 (+1)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from gputop.core.model import GpuSample
from gputop.core.xid import describe

JobXids = tuple[tuple[int, int], ...]
"""(Xid, count), by code."""


class RanOnCards(Protocol):
    """A job of this machine (``Job``) or of a lab host (``HostJob``): when, and on which cards."""

    @property
    def started_at(self) -> float | None: ...
    @property
    def ended_at(self) -> float | None: ...
    @property
    def uuids(self) -> tuple[str, ...]: ...
    @property
    def physical_indices(self) -> tuple[int, ...]: ...


def job_window(job: RanOnCards, now: float) -> tuple[float, float] | None:
    """When the job ran (to ``now`` while it runs); None before it started."""
    if job.started_at is None:
        return None
    return job.started_at, job.ended_at if job.ended_at is not None else now


def is_job_card(job: RanOnCards, physical_index: int, uuid: str | None) -> bool:
    if job.uuids:
        return uuid is not None and uuid in job.uuids
    return physical_index in job.physical_indices


def live_job_xids(job: RanOnCards, gpus: Iterable[GpuSample], now: float) -> JobXids:
    """The Xids a dashboard's cards hold that arrived on ``job``'s cards while it ran."""
    window = job_window(job, now)
    if window is None:
        return ()
    counts: dict[int, int] = {}
    for gpu in gpus:
        health = gpu.health
        if health is None or not is_job_card(job, gpu.physical_index, gpu.uuid):
            continue
        for event in health.xid_events or ():
            if window[0] <= event.time <= window[1]:
                counts[event.xid] = counts.get(event.xid, 0) + event.count
    return tuple(sorted(counts.items()))


def mark(xids: JobXids) -> str:
    """``✖ Xid 79``, ``⚠ Xid 13 ×40 (+1)``; empty without an Xid."""
    if not xids:
        return ""
    code, count = min(xids, key=lambda item: (describe(item[0]).severity != "critical", item[0]))
    sign = "✖" if describe(code).severity == "critical" else "⚠"
    times = f" ×{count}" if count > 1 else ""
    more = f" (+{len(xids) - 1})" if len(xids) > 1 else ""
    return f"{sign} Xid {code}{times}{more}"


def xids_text(xids: JobXids) -> str:
    """For a sentence: ``Xid 13 ×40, Xid 31`` ."""
    return ", ".join(f"Xid {code}" + (f" ×{count}" if count > 1 else "") for code, count in xids)


def xids_json(xids: JobXids | None) -> list[dict[str, object]] | None:
    """``null`` where no Xid source was open (no history store), else each code."""
    if xids is None:
        return None
    return [
        {
            "xid": code,
            "count": count,
            "meaning": describe(code).meaning,
            "action": describe(code).action,
        }
        for code, count in xids
    ]
