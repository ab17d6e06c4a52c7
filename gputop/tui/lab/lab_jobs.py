"""The jobs of every host: what each host's agent streams, decoded in the core (``HostJob``).

Keys act on the highlighted job on its own host: ``enter`` follows its log, ``K`` stops it
(after a yes), both through ``gputop jobs`` there (gputop/tui/lab/remote_actions.py).
Every field comes from a server: it is cleaned and drawn as plain text.
"""

from __future__ import annotations

import time

from rich.text import Text

from gputop.core import job_columns as columns
from gputop.core.job_columns import HostJob
from gputop.tui.safe import plain
from gputop.tui.widgets.jobs_panel import panel_cells
from gputop.tui.widgets.jobs_table import JobsTable

SHOWN = (*columns.COLUMNS[:4], columns.DURATION, *columns.USAGE)
COLUMNS = ("HOST", *(column.short for column in SHOWN))


def job_cells(job: HostJob, now: float) -> tuple[Text, ...]:
    return (plain(job.host_name, style="cyan"), *panel_cells(job, now, SHOWN))


class LabJobsPanel(JobsTable[HostJob]):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, "Jobs (every host)", id=id)

    def show(self, jobs: list[HostJob], now: float | None = None) -> None:
        now = time.time() if now is None else now
        newest = sorted(jobs, key=lambda j: j.created_at, reverse=True)
        by_key = {f"{job.host}:{job.id}": job for job in newest}
        cells = {key: job_cells(job, now) for key, job in by_key.items()}
        active = sum(1 for job in newest if job.active)
        count = f"{len(newest)} job" + ("" if len(newest) == 1 else "s")
        self.put_rows(by_key, cells, f"{count}, {active} active · enter log · K stop")
