"""The jobs of every host: what each host's agent streams, decoded in the core (``HostJob``).

``enter`` and ``K`` act on the highlighted job on its own host, through ``gputop jobs`` there
(remote_screens.py). Every field comes from a server: cleaned, drawn as plain text. A job
whose cards (on its own host, as its agent sent them) had an Xid while it ran is marked after
its status, as in the local panel. Of a host that sends more jobs than the lab reads
(``MAX_HOST_JOBS``), the subtitle says how many are shown; the panel lists as many of every
host together, the active first.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.markup import escape

from gputop.core import job_columns as columns
from gputop.core.job_columns import HostJob
from gputop.core.jobs.xid_marks import live_job_xids
from gputop.core.jobs.xid_marks import mark as job_xid_mark
from gputop.core.model import GpuSample
from gputop.core.records import frozen
from gputop.core.remote.host_jobs import MAX_HOST_JOBS
from gputop.core.remote.status import HostStatus
from gputop.core.safe_text import clean
from gputop.tui.safe import plain
from gputop.tui.widgets.jobs_panel import panel_cells
from gputop.tui.widgets.jobs_table import JobsTable

SHOWN = (*columns.COLUMNS[:4], columns.DURATION, *columns.USAGE)
COLUMNS = ("HOST", *(column.short for column in SHOWN))
MAX_ROWS = MAX_HOST_JOBS
"""The most jobs the panel lists, of every host together (a host sends as many)."""


@frozen(slots=False)
class HostCards:
    """A host's cards as its latest snapshot gave them, and its own clock then."""

    gpus: Sequence[GpuSample]
    now: float
    """The host's clock at that snapshot (a host's job and Xid times are on it)."""


def host_cards(statuses: Sequence[HostStatus]) -> dict[int, HostCards]:
    """Each host's cards that had an Xid, by its position; a host without one is absent."""
    found = {}
    for position, status in enumerate(statuses):
        snapshot = status.snapshot
        if snapshot is None:
            continue
        gpus = [g for g in snapshot.gpus if g.health is not None and g.health.xid_events]
        if gpus:  # the snapshot's time is the arrival's where the host's clock is far off
            found[position] = HostCards(gpus, snapshot.timestamp + (status.clock_skew_s or 0.0))
    return found


def xid_mark(job: HostJob, cards: Mapping[int, HostCards]) -> str:
    """``✖ Xid 79`` for a job whose cards, on its own host, had that Xid while it ran."""
    found = cards.get(job.host)
    return "" if found is None else job_xid_mark(live_job_xids(job, found.gpus, found.now))


def job_cells(job: HostJob, now: float, mark: str = "") -> tuple[Text, ...]:
    return (plain(job.host_name, style="cyan"), *panel_cells(job, now, SHOWN, xid_mark=mark))


def cut_note(cut: Mapping[str, tuple[int, int]]) -> str:
    """What the subtitle says of the hosts whose oldest jobs were left out: by host name,
    (jobs shown, jobs sent)."""
    if not cut:
        return ""
    if len(cut) == 1:
        ((host, (shown, sent)),) = cut.items()
        return f"{escape(clean(host))}: newest {shown:,} of {sent:,} jobs shown · "
    sent = sum(total for _, total in cut.values())
    shown = sum(kept for kept, _ in cut.values())
    return f"{len(cut)} hosts: newest {shown:,} of {sent:,} jobs shown · "


class LabJobsPanel(JobsTable[HostJob]):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, "Jobs (every host)", id=id)

    def show(
        self,
        jobs: list[HostJob],
        now: float | None = None,
        statuses: Sequence[HostStatus] = (),
        cut: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        """``jobs`` of the hosts ``statuses`` (their cards' Xids mark them); ``cut``: the
        hosts whose oldest jobs were not decoded, by name, as (shown, sent)."""
        now = time.time() if now is None else now
        cards = host_cards(statuses)
        newest = sorted(jobs, key=lambda j: j.created_at, reverse=True)
        rows = shown_rows(newest)
        by_key = {f"{job.host}:{job.id}": job for job in rows}
        cells = {key: job_cells(job, now, xid_mark(job, cards)) for key, job in by_key.items()}
        active = sum(1 for job in newest if job.active)
        if len(rows) < len(newest):
            count = f"newest {len(rows):,} of {len(newest):,} jobs"
        else:
            count = f"{len(newest)} job" + ("" if len(newest) == 1 else "s")
        note = cut_note(cut or {})
        self.put_rows(by_key, cells, f"{count}, {active} active · {note}enter log · K stop")


def shown_rows(newest: Sequence[HostJob], limit: int = MAX_ROWS) -> list[HostJob]:
    """The rows of ``newest`` (newest first) the panel lists: every active job and the newest
    ended ones, ``limit`` in all. Twenty hosts of 500 jobs each were 10,000 rows, each made
    again at every redraw (1 s a tick)."""
    if len(newest) <= limit:
        return list(newest)
    active = [job for job in newest if job.active][:limit]
    room = limit - len(active)
    kept = {id(job) for job in active}
    kept.update(id(job) for job in [job for job in newest if not job.active][:room])
    return [job for job in newest if id(job) in kept]
