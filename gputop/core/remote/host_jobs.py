"""A host's jobs as its agent streams them (``gputop jobs --json`` records), decoded here once.

A record is another machine's: each field is checked by type and range where it enters and a
record without a job id is dropped, so no dashboard reads a server's dict. A ``HostJob``
answers what a job's columns ask (gputop/core/job_columns.py) as a local ``Job`` does, and
what the launch warnings ask of an active job (id, name, cards). Its text is drawn as plain
text, cleaned, by whoever shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gputop.core.jobs.usage import JobUsage, usage_from_json
from gputop.core.numbers import LATEST_TIME_S, MAX_ID, MAX_PID, whole_within, within


@dataclass(frozen=True)
class HostJob:
    """One job of one host, as its agent described it."""

    host: int
    """The host's position in the lab."""
    host_name: str
    id: int
    name: str = ""
    status: str = "?"
    status_text: str = "?"
    physical_indices: tuple[int, ...] = ()
    pid: int | None = None
    command_text: str = ""
    created_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    usage: JobUsage | None = None
    """What it used, as its host measured it: range-checked where it entered."""
    local: bool = False
    """A job of this machine (the lab's ``local``): acted on without ssh."""

    @property
    def ssh_host(self) -> str | None:
        """Where ``gputop jobs`` runs for it: the host over ssh, or None for this machine."""
        return None if self.local else self.host_name

    @property
    def active(self) -> bool:
        return self.status in ("waiting", "running")

    @property
    def gpus_text(self) -> str:
        return ",".join(str(i) for i in self.physical_indices) or "-"

    def duration_s(self, now: float | None = None) -> float | None:
        if self.started_at is None:
            return None
        end = self.ended_at if self.ended_at is not None else now
        return None if end is None else max(0.0, end - self.started_at)


def host_jobs(
    host: int, name: str, records: Sequence[Any] | None, local: bool = False
) -> list[HostJob]:
    """The jobs in a host's records; one that is not a record with a job id is left out."""
    jobs = []
    for record in records or ():
        if isinstance(record, Mapping) and whole_within(record.get("id"), 0, MAX_ID):
            jobs.append(_decoded(host, name, record, local))
    return jobs


def _decoded(host: int, name: str, record: Mapping[str, Any], local: bool) -> HostJob:
    status = _text(record.get("status")) or "?"
    gpus = record.get("gpus")
    pid = record.get("pid")
    return HostJob(
        host,
        name,
        record["id"],
        name=_text(record.get("name")),
        status=status,
        status_text=_text(record.get("status_text")) or status,
        physical_indices=tuple(
            g for g in (gpus if isinstance(gpus, list) else ()) if whole_within(g, 0, MAX_ID)
        ),
        pid=pid if whole_within(pid, 1, MAX_PID) else None,
        command_text=_text(record.get("command_text")),
        created_at=_time(record.get("created_at")) or 0.0,
        started_at=_time(record.get("started_at")),
        ended_at=_time(record.get("ended_at")),
        usage=usage_from_json(record.get("usage")),
        local=local,
    )


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _time(value: object) -> float | None:
    return float(value) if within(value, 0.0, LATEST_TIME_S) else None  # type: ignore[arg-type]
