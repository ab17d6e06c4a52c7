"""The jobs gputop launched: cards, status, how long, and the last line each one logged.

The panel only renders a ``JobsView`` made off the UI thread; it never reads the store.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.text import Text

from gputop.core import job_columns as columns
from gputop.core.job_columns import JobColumn, ShownJob
from gputop.core.jobs.model import Job
from gputop.core.jobs.service import JobsView
from gputop.core.jobs.xid_marks import live_job_xids
from gputop.core.jobs.xid_marks import mark as job_xid_mark
from gputop.core.model import Snapshot
from gputop.core.safe_text import clean
from gputop.core.units import duration, duration_coarse
from gputop.tui.safe import plain
from gputop.tui.widgets.jobs_table import JobsTable

if TYPE_CHECKING:
    from gputop.core.slurm.queue import SlurmJob

COLUMNS = (*(column.short for column in columns.COLUMNS), columns.LAST_LINE[1])

STATUS_STYLES = {
    "waiting": "yellow",
    "running": "bold cyan",
    "exited": "green",
    "failed": "bold red",
    "killed": "magenta",
    "lost": "red",
}


def panel_cells(
    job: ShownJob, now: float, shown: Sequence[JobColumn] = columns.COLUMNS, xid_mark: str = ""
) -> list[Text]:
    """A job's cells in the panels. Text, never str: a str cell is read as markup
    (``exp[/]1`` would raise); the status coloured by what it is, then ``xid_mark`` (its
    cards' Xids while it ran: ``✖ Xid 79``, jobs/xid_marks.py)."""
    style = STATUS_STYLES.get(job.status, "")
    cells = [
        plain(column.text(job, now, False), style=style if column is columns.STATUS else "")
        for column in shown
    ]
    if xid_mark and columns.STATUS in shown:
        mark_style = "bold red" if xid_mark.startswith("✖") else "bold yellow"
        cells[list(shown).index(columns.STATUS)].append(f" {xid_mark}", style=mark_style)
    return cells


_STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} ")


def shown_log_line(job: Job, line: str) -> str:
    """gputop's own line without its date stamp and "job N (name)", which the row already
    shows: the column is narrow, and the stamp alone filled it ("[gputop] 2026-12-01 2")."""
    from gputop.core.jobs.logs import LOG_PREFIX  # a job shown: not at start

    if not line.startswith(LOG_PREFIX):
        return line
    rest = line[len(LOG_PREFIX) :]
    stamp = _STAMP.match(rest)
    if stamp is None:
        return line
    rest = rest[stamp.end() :]
    for lead in (f"job {job.id} ({clean(job.name)}) ", f"job {job.id} "):
        if rest.startswith(lead):
            rest = rest[len(lead) :]
            break
    return LOG_PREFIX + rest


def job_cells(job: Job, last_line: str, now: float, xid_mark: str = "") -> tuple[Text, ...]:
    """A job's row, its last column the last line of its log."""
    if job.status == "waiting" and not last_line:
        last_line = job.waiting_reason  # why it has not started (gputop jobs says the same)
    last_line = shown_log_line(job, last_line)
    return (
        *panel_cells(job, now, xid_mark=xid_mark),
        plain(f"(log cut) {last_line}" if job.log_cut else last_line, style="dim"),
    )


def slurm_cells(job: SlurmJob, now: float) -> tuple[Text, ...]:
    """A Slurm job gputop did not submit: Slurm's id, state and time left."""
    left = job.time_left_s(now)
    started = job.start_time if job.state == "RUNNING" else None
    return (
        Text(f"S{job.job_id}"),
        plain(job.name),
        Text(",".join(str(i) for i in job.gpu_indices) or "-"),
        plain(job.status_text, style="bold cyan" if job.state == "RUNNING" else "yellow"),
        Text("-" if started is None else time.strftime("%H:%M:%S", time.localtime(started))),
        Text("-" if started is None else duration_coarse(max(0.0, now - started))),
        *(Text("-") for _ in columns.USAGE),  # not measured by gputop
        plain(
            f"Slurm job on {job.nodes or '-'}"
            + ("" if left is None else f", {duration(left)} left"),
            style="dim",
        ),
    )


class JobsPanel(JobsTable[Job]):
    ROOM_AFTER = 15  # the last log line's heading, LAST LOG LINE, where the width allows

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, "Jobs", id=id)
        self._view: JobsView | None = None
        self._slurm_jobs: tuple[SlurmJob, ...] = ()
        """The user's Slurm jobs gputop did not submit, listed after gputop's."""

    def show(self, view: JobsView, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self._view = view
        jobs = list(reversed(view.jobs))  # newest first: the one just launched is on top
        marks = self._xid_marks(jobs)
        cells = {
            str(job.id): job_cells(job, view.last_lines.get(job.id, ""), now, marks.get(job.id, ""))
            for job in jobs
        }
        submitted = {job.slurm_job_id for job in jobs if job.slurm_job_id is not None}
        for slurm in self._slurm_jobs:
            if slurm.job_id not in submitted:
                cells[f"slurm-{slurm.job_id}"] = slurm_cells(slurm, now)
        count = f"{len(jobs)} job" + ("" if len(jobs) == 1 else "s")
        self.put_rows(
            {str(job.id): job for job in jobs},
            cells,
            f"{count}, {len(view.active)} active · enter log · K stop",
        )

    def _xid_marks(self, jobs: Sequence[Job]) -> dict[int, str]:
        """Each job's mark from the Xids the dashboard's cards had while it ran (the app's
        last sample; as the toast at its end, jobs_actions.py), on the sample's clock."""
        snapshot = getattr(self.app, "snapshot", None)
        if not isinstance(snapshot, Snapshot):
            return {}
        return {
            job.id: job_xid_mark(live_job_xids(job, snapshot.gpus, snapshot.timestamp))
            for job in jobs
        }

    def show_slurm(self, jobs: tuple[SlurmJob, ...]) -> None:
        """The user's own Slurm jobs, beside gputop's (docs/slurm.md)."""
        if jobs != self._slurm_jobs:
            self._slurm_jobs = jobs
            if self._view is not None:
                self.show(self._view)
