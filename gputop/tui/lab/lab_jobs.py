"""The jobs of every host: what each host's agent streams (``gputop jobs --json`` records).

Keys act on the highlighted job on its own host: ``enter`` follows its log, ``K`` stops it
(after a yes), both through ``gputop jobs`` there (gputop/tui/lab/remote_actions.py).
Every field comes from a server: it is cleaned and drawn as plain text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from gputop.core.jobs.usage import JobUsage, activity_cell, usage_from_json
from gputop.core.units import duration_coarse, human_bytes
from gputop.tui.safe import plain
from gputop.tui.widgets.jobs_panel import STATUS_STYLES
from gputop.tui.widgets.jobs_table import JobRequest, JobsTable

COLUMNS = ("HOST", "ID", "NAME", "GPUS", "STATUS", "DURATION", "GPU TIME", "PEAK", "SM ACT")


@dataclass(frozen=True)
class RemoteJob:
    """One job of one host, as its agent described it."""

    host: int
    host_name: str
    record: Mapping[str, Any]
    local: bool = False
    """A job of this machine (the lab's ``local``): acted on without ssh."""

    @property
    def ssh_host(self) -> str | None:
        """Where ``gputop jobs`` runs for it: the host over ssh, or None for this machine."""
        return None if self.local else self.host_name

    @property
    def id(self) -> int:
        return int(self.record["id"])

    @property
    def status(self) -> str:
        return str(self.record.get("status", "?"))

    @property
    def active(self) -> bool:
        return self.status in ("waiting", "running")

    @property
    def text(self) -> str:
        return str(self.record.get("status_text") or self.status)

    @property
    def usage(self) -> JobUsage | None:
        """What it used, as its host measured it: range-checked here, where it enters."""
        return usage_from_json(self.record.get("usage"))

    def field(self, name: str) -> str:
        value = self.record.get(name)
        return "" if value is None else str(value)


def jobs_of(
    host: int, name: str, records: Sequence[Any] | None, local: bool = False
) -> list[RemoteJob]:
    jobs = []
    for record in records or ():
        if isinstance(record, Mapping) and isinstance(record.get("id"), int):
            jobs.append(RemoteJob(host, name, record, local))
    return jobs


def _duration(job: RemoteJob, now: float) -> str:
    started, ended = job.record.get("started_at"), job.record.get("ended_at")
    if not isinstance(started, (int, float)):
        return "-"
    end = ended if isinstance(ended, (int, float)) else now
    seconds = max(0.0, end - started)
    return duration_coarse(seconds, seconds_below_minute=True)


def usage_cells(job: RemoteJob) -> tuple[Text, Text, Text]:
    usage = job.usage
    if usage is None:
        return Text("-"), Text("-"), Text("-")
    peak = usage.peak_memory_bytes
    return (
        Text(duration_coarse(usage.gpu_seconds, seconds_below_minute=True)),
        Text("-" if peak is None else human_bytes(peak)),
        Text(activity_cell(usage)),
    )


def _gpus(job: RemoteJob) -> str:
    gpus = job.record.get("gpus")
    if isinstance(gpus, list) and gpus:
        return ",".join(str(int(g)) for g in gpus if isinstance(g, int))
    return "-"


class LabJobsPanel(JobsTable[RemoteJob]):
    class LogRequested(JobRequest[RemoteJob]):
        pass

    class StopRequested(JobRequest[RemoteJob]):
        pass

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, "Jobs (every host)", id=id)

    def show(self, jobs: list[RemoteJob], now: float | None = None) -> None:
        now = time.time() if now is None else now
        newest = sorted(jobs, key=lambda j: j.record.get("created_at") or 0, reverse=True)
        by_key = {f"{job.host}:{job.id}": job for job in newest}
        cells: dict[str, tuple[Text, ...]] = {
            key: (
                plain(job.host_name, style="cyan"),
                Text(str(job.id)),
                plain(job.field("name")),
                Text(_gpus(job)),
                plain(job.text, style=STATUS_STYLES.get(job.status, "")),
                Text(_duration(job, now)),
                *usage_cells(job),
            )
            for key, job in by_key.items()
        }
        active = sum(1 for job in newest if job.active)
        count = f"{len(newest)} job" + ("" if len(newest) == 1 else "s")
        self.put_rows(by_key, cells, f"{count}, {active} active · enter log · K stop")


class ActiveJob:
    """A host's active jobs in the shape the launch warnings read (id, name, cards)."""

    def __init__(self, job: RemoteJob) -> None:
        self.id = job.id
        self.name = job.field("name")
        gpus = job.record.get("gpus") or ()
        self.physical_indices = tuple(int(g) for g in gpus if isinstance(g, int))

    @classmethod
    def of(cls, jobs: Sequence[RemoteJob]) -> tuple[ActiveJob, ...]:
        return tuple(cls(job) for job in jobs)
