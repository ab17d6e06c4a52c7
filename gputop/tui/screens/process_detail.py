"""One GPU process in detail: its card, its own CUDA view and rank, its job's other ranks, the
gputop or Slurm job it belongs to, and what the recorder stored of it over the last hour
(docs/history.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.core.history.card_history import WINDOWS_S
from gputop.core.history.process_history import ProcessHistory, read_process_history
from gputop.core.model import GpuProcess, ProcessOrigin, Snapshot
from gputop.core.process_detail import DetailLine, describe_process, job_lines
from gputop.core.process_jobs import NO_JOBS, ProcessJobs, read_process_jobs
from gputop.tui.screens.process_history import render_process_history
from gputop.tui.workers import ReportsWorkerFailures

_STYLES = {"heading": "bold", "warning": "bold yellow", "dim": "dim", "": ""}
HISTORY_COLUMNS = 60
CLOSE_HINT = "escape, enter or q closes this"
"""The window's bottom border: the keys its binding below closes it with."""


class ProcessDetailScreen(ReportsWorkerFailures, ModalScreen[None]):
    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(
        self,
        snapshot: Snapshot,
        process: GpuProcess,
        history_store: Path | None = None,
        clock: Callable[[], float] = time.time,
        *,
        jobs: ProcessJobs = NO_JOBS,
        job_names: Mapping[int, tuple[str, str]] | None = None,
        slurm_job_users: Mapping[int, int] | None = None,
    ) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.process = process
        self.history_store = history_store
        self._clock = clock
        self.history: ProcessHistory | None = None
        """What the recorder's store holds of this process (a test waits for it)."""
        self.jobs = jobs
        """The gputop and Slurm jobs the dashboard knows the process by; its environment
        (``/proc/PID``) may name them where the dashboard does not."""
        self._job_names = dict(job_names or {})
        """gputop job id → its name and status, of the jobs the dashboard lists."""
        self._slurm_job_users = dict(slurm_job_users or {})
        """Slurm job id → its uid, as the dashboard last read Slurm: the same proof of a
        process's Slurm job as its process table's (gputop/core/slurm/cgroup.py)."""
        self.jobs_read = False
        """Whether the process's own environment was read for its jobs (a test waits)."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog") as window:
            # On the border: seen without scrolling, where the detail needs it (80x24).
            window.border_subtitle = CLOSE_HINT
            yield Static(_text(describe_process(self.snapshot, self.process)), id="process-detail")
            yield Static(id="detail-jobs")
            if self.history_store is not None:
                yield Static(Text("Its last hour", style="bold"))
                yield Static(Text("Reading the history…", style="dim"), id="detail-history")
            yield Static(Text("H on the process: day and week", style="dim"))

    def on_mount(self) -> None:
        self._show_jobs(NO_JOBS, read=False)
        self._read_jobs()
        if self.history_store is not None:
            self._read_history(self.history_store)

    @work(thread=True, group="process-detail-jobs", exclusive=True, exit_on_error=False)
    def _read_jobs(self) -> None:
        """Its environment names its jobs (gputop/core/process_jobs.py): read off the UI
        thread, and only for a process of this machine (a simulated or foreign pid is none)."""
        process = self.process
        found = NO_JOBS
        if process.origin is ProcessOrigin.HOST and process.pid > 0:
            found = read_process_jobs(Path("/proc") / str(process.pid), self._slurm_job_users)
        self.app.call_from_thread(self._show_jobs, found)

    def _show_jobs(self, found: ProcessJobs, read: bool = True) -> None:
        """What the dashboard knew, and what the environment adds to it (``read``: the
        environment was read, where it could be)."""
        known = self.jobs
        self.jobs = ProcessJobs(
            gputop_job=known.gputop_job if known.gputop_job is not None else found.gputop_job,
            slurm_job=known.slurm_job if known.slurm_job is not None else found.slurm_job,
        )
        self.jobs_read = self.jobs_read or read
        job = self.jobs.gputop_job
        name, status = self._job_names.get(job, (None, None)) if job is not None else (None, None)
        shown = self.query_one("#detail-jobs", Static)
        text = _text(job_lines(job, self.jobs.slurm_job, name, status))
        shown.update(text)
        shown.display = bool(text.plain)

    @work(thread=True, group="process-detail-history", exclusive=True, exit_on_error=False)
    def _read_history(self, store: Path) -> None:
        process = self.process
        found = read_process_history(
            store, process.pid, process.start_time, WINDOWS_S["1"], self._clock(), HISTORY_COLUMNS
        )
        self.app.call_from_thread(self._show_history, found)

    def _show_history(self, found: ProcessHistory) -> None:
        self.history = found
        self.query_one("#detail-history", Static).update(render_process_history(found))


def _text(lines: list[DetailLine]) -> Text:
    """The lines in gputop's styles: cleaned by their maker, never markup."""
    text = Text()
    for number, line in enumerate(lines):
        if number:
            text.append("\n")
        text.append(line.text, style=_STYLES.get(line.style, ""))
    return text
