"""A host's jobs as its agent streams them (``gputop jobs --json`` records), decoded here once.

A record is another machine's: each field is checked by type and range where it enters and a
record without a job id is dropped, so no dashboard reads a server's dict: it reads a
``HostJob`` (gputop/core/job_columns.py), whose text is drawn as plain text, cleaned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gputop.core.job_columns import HostJob
from gputop.core.jobs.usage import usage_from_json
from gputop.core.numbers import LATEST_TIME_S, MAX_ID, MAX_PID, whole_within, within
from gputop.core.remote.protocol import MAX_GPUS, host_text

MAX_HOST_JOBS = 500
"""The most jobs of one host the lab shows: what a jobs panel can usefully list. The agent
sends its active jobs and its newest ended ones up to this many (agent.py); of a longer list
(an older agent sends every job it has, a hostile one 100,000) the lab decodes only the
newest this many, and says how many it left out."""
MAX_UUID_CHARS = 128


def host_jobs(
    host: int,
    name: str,
    records: Sequence[Any] | None,
    local: bool = False,
) -> list[HostJob]:
    """The jobs in the newest ``MAX_HOST_JOBS`` of a host's records (the list is oldest
    first); one that is not a record with a job id is left out."""
    jobs = []
    for record in newest(records, MAX_HOST_JOBS):
        if isinstance(record, Mapping) and whole_within(record.get("id"), 0, MAX_ID):
            jobs.append(_decoded(host, name, record, local))
    return jobs


def newest(records: Sequence[Any] | None, limit: int = MAX_HOST_JOBS) -> Sequence[Any]:
    """The newest ``limit`` records of a list sent oldest first, not read beyond them."""
    if not records:
        return ()
    return records[-limit:] if len(records) > limit else records


def left_out(records: Sequence[Any] | None) -> int:
    """How many of a host's records ``host_jobs`` leaves undecoded (the oldest)."""
    return max(0, len(records or ()) - MAX_HOST_JOBS)


def _decoded(host: int, name: str, record: Mapping[str, Any], local: bool) -> HostJob:
    status = _text(record.get("status")) or "?"
    gpus = record.get("gpus")
    uuids = record.get("uuids")
    pid = record.get("pid")
    return HostJob(
        host,
        name,
        record["id"],
        name=_text(record.get("name")),
        status=status,
        status_text=_text(record.get("status_text")) or status,
        physical_indices=tuple(
            g
            for g in (gpus[:MAX_GPUS] if isinstance(gpus, list) else ())
            if whole_within(g, 0, MAX_ID)
        ),
        uuids=tuple(
            u[:MAX_UUID_CHARS]
            for u in (uuids[:MAX_GPUS] if isinstance(uuids, list) else ())
            if isinstance(u, str) and u
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
    return host_text(value) or ""


def _time(value: object) -> float | None:
    return float(value) if within(value, 0.0, LATEST_TIME_S) else None  # type: ignore[arg-type]
