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
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from gputop.core.units import duration_coarse
from gputop.tui.safe import plain
from gputop.tui.widgets.jobs_panel import STATUS_STYLES
from gputop.tui.widgets.table_rows import replace_rows

COLUMNS = ("HOST", "ID", "NAME", "GPUS", "STATUS", "DURATION")


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


def _gpus(job: RemoteJob) -> str:
    gpus = job.record.get("gpus")
    if isinstance(gpus, list) and gpus:
        return ",".join(str(int(g)) for g in gpus if isinstance(g, int))
    return "-"


class LabJobsPanel(DataTable[Any]):
    BINDINGS = [
        Binding("enter", "show_log", "Log"),
        Binding("K", "stop_job", "Stop job"),
    ]

    class LogRequested(Message):
        def __init__(self, job: RemoteJob) -> None:
            super().__init__()
            self.job = job

    class StopRequested(Message):
        def __init__(self, job: RemoteJob) -> None:
            super().__init__()
            self.job = job

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._jobs: dict[str, RemoteJob] = {}
        self._order: list[str] = []
        self._cells: dict[str, tuple[Text, ...]] = {}

    def on_mount(self) -> None:
        self.border_title = "Jobs (every host)"
        for name in COLUMNS:
            self.add_column(name, key=name)

    @property
    def current_job(self) -> RemoteJob | None:
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._jobs.get(self._order[self.cursor_row])

    def show(self, jobs: list[RemoteJob], now: float | None = None) -> None:
        now = time.time() if now is None else now
        newest = sorted(jobs, key=lambda j: j.record.get("created_at") or 0, reverse=True)
        self._jobs = {f"{job.host}:{job.id}": job for job in newest}
        order = list(self._jobs)
        cells: dict[str, tuple[Text, ...]] = {
            key: (
                plain(job.host_name, style="cyan"),
                Text(str(job.id)),
                plain(job.field("name")),
                Text(_gpus(job)),
                plain(job.text, style=STATUS_STYLES.get(job.status, "")),
                Text(_duration(job, now)),
            )
            for key, job in self._jobs.items()
        }
        if order != self._order:
            keep = self._order[self.cursor_row] if self.current_job is not None else None
            replace_rows(self, order, cells, keep)
            self._order = order
        else:
            for key, values in cells.items():
                old = self._cells.get(key)
                for column, value in enumerate(values):
                    if old is None or old[column] != value:
                        self.update_cell(key, COLUMNS[column], value, update_width=True)
        self._cells = cells
        active = sum(1 for job in newest if job.active)
        count = f"{len(newest)} job" + ("" if len(newest) == 1 else "s")
        subtitle = f"{count}, {active} active · enter log · K stop"
        if subtitle != self.border_subtitle:  # setting it, even to itself, repaints
            self.border_subtitle = subtitle

    def action_show_log(self) -> None:
        if (job := self.current_job) is not None:
            self.post_message(self.LogRequested(job))

    def action_stop_job(self) -> None:
        if (job := self.current_job) is not None:
            self.post_message(self.StopRequested(job))
