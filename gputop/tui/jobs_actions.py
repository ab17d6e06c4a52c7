"""The dashboard's jobs: launching on the selected cards, the jobs panel, logs, stopping.

A thin layer over ``gputop.core.jobs.service.JobsService``, which owns the store and the log
tails: the store is touched only from worker threads (each with its own SQLite connection),
the UI thread renders the ``JobsView`` they post, and the service's problems arrive as
``JobStoreProblem`` messages, shown alike by both dashboards (dashboard_base.py).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.message import Message
from textual.notifications import SeverityLevel

from gputop.core.errors import GputopError
from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.jobs.service import JobsView, job_memory_peaks
from gputop.core.jobs.xid_marks import JobXids, live_job_xids
from gputop.core.model import Snapshot
from gputop.core.records import mutable
from gputop.tui.dashboard_base import DashboardApp
from gputop.tui.safe import plain
from gputop.tui.textual_compat import unless_closing
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.process_table import ProcessTable

if TYPE_CHECKING:
    from gputop.tui.widgets.jobs_panel import JobsPanel


@mutable
class JobsRead(Message):
    """The jobs, read again at once after a launch or a stop."""

    jobs: JobsView

    def can_replace(self, message: Message) -> bool:
        """This read, waiting to be shown, gives way to ``message`` (posted after it) only
        where that is a newer read, never an older one that arrived late."""
        return isinstance(message, JobsRead) and message.jobs.read_number >= self.jobs.read_number


class JobsActions(DashboardApp):
    """The jobs' keys and messages; the jobs themselves live in ``jobs_service``."""

    snapshot: Snapshot | None
    _launched_here: frozenset[int] = frozenset()
    """Jobs launched from this dashboard: their end is news even if no read saw them run."""
    _job_peaks: Mapping[int, int] = MappingProxyType({})
    """Job id → the most GPU memory its processes held together, as seen here (replaced,
    never changed in place)."""

    def jobs_table_mounted(self) -> bool:
        """Whether ``jobs_table`` has mounted the table yet."""
        return bool(self.query_one("#jobs-box").children)

    def jobs_table(self) -> JobsPanel:
        """The jobs panel, mounted the first time it is needed (a job or Slurm job to list, J,
        a launch), with the jobs last read: a start without jobs mounts no table and imports
        no DataTable before the first frame (docs/speed.md, "The first frame")."""
        from gputop.tui.widgets.jobs_panel import JobsPanel

        box = self.query_one("#jobs-box")
        if box.children:
            return box.query_one(JobsPanel)
        panel = JobsPanel(id="jobs")
        box.mount(panel)
        if self.jobs_service.view.read_number:
            panel.show(self.jobs_service.view)
        return panel

    @work(thread=True, group="jobs", exit_on_error=False)
    def _refresh_jobs(self) -> None:
        jobs = self.jobs_service.read_now(self.snapshot)
        if jobs is not None:
            self.post_message(JobsRead(jobs))

    @unless_closing
    def on_jobs_read(self, message: JobsRead) -> None:
        self._show_jobs(message.jobs)

    def _show_jobs(self, jobs: JobsView) -> None:
        shown = self.jobs_service.view
        if jobs.read_number < shown.read_number:
            return  # read before what is shown, arrived after it: it would show the past
        peaks = self._job_peaks = job_memory_peaks(self._job_peaks, self.snapshot, jobs)
        launched = self._launched_here
        if jobs.jobs:  # events are of jobs read now: none without (nor their module)
            from gputop.core.jobs.notify import job_events

            for event in job_events(shown.jobs, jobs.jobs, peaks, launched, self._job_xids):
                # Plain text (markup=False): the job's name is the user's, cleaned in the event.
                severity: SeverityLevel = "warning" if event.failed else "information"
                self.notify(event.text, severity=severity, timeout=10, markup=False)
        self.jobs_service.view = jobs
        self.query_one(ProcessTable).set_jobs(jobs.job_of_pid)
        if jobs.jobs or self.jobs_table_mounted():  # no table for no job (until J)
            self.jobs_table().show(jobs)
        log_screen = sys.modules.get("gputop.tui.screens.job_log")  # not before the first log
        if log_screen and isinstance(self.screen, log_screen.JobLogScreen):
            for job in jobs.jobs:
                self.screen.update_job(job)

    def _job_xids(self, job: Job) -> JobXids:
        """The Xids this dashboard's cards hold that came while ``job`` ran (its toast)."""
        snapshot = self.snapshot
        if snapshot is None:
            return ()
        return live_job_xids(job, snapshot.gpus, snapshot.timestamp)

    def action_launch(self) -> None:
        # The launch dialog (and its widgets) is imported when first opened, not before the
        # dashboard's first frame (docs/speed.md).
        from gputop.tui.screens.launch import LaunchContext, LaunchScreen

        if self.snapshot is None:
            self.notify("No GPU reading yet: try again in a moment.")
            return
        cards = self.query_one(GpuGrid).selection
        if not cards:
            self.notify("No card to launch on.", severity="warning")
            return
        service = self.jobs_service
        context = LaunchContext(
            snapshot=self.snapshot,
            physical_indices=cards,
            user=service.user,
            active_jobs=service.view.active,
            cwd=service.cwd,
            environ=service.job_environ(),
            jobs=service,
        )

        def launched(job: Job | None) -> None:
            if job is None:
                return
            gpus = ",".join(str(i) for i in job.physical_indices)
            self._launched_here = self._launched_here | {job.id}
            if job.wait_for_free and job.state is JobState.WAITING:  # not started: queued
                free = "the card is" if len(job.physical_indices) == 1 else "the cards are"
                said = f"queued for GPU {gpus}: it starts once {free} free"
            else:
                said = f"launched on GPU {gpus}"
                if job.mode is RunMode.TMUX:  # made in the background: say which window
                    said += f" in tmux window gputop-{job.id}"
            self.notify(f"Job {job.id} ({job.name}) {said}. Log: {job.log_path}")
            self.jobs_shown = True
            # The new job is highlighted, for enter and K once tab reaches the jobs; the focus
            # stays where it was: the arrows, space and l still act on the cards.
            self.jobs_table().highlight(str(job.id))
            self.keep_focus_shown()
            self._refresh_jobs()

        self.push_screen(LaunchScreen(context), launched)

    def on_jobs_table_log_requested(self, message: JobsPanel.LogRequested) -> None:
        from gputop.tui.screens.job_log import JobLogScreen  # not before the first frame

        self.push_screen(JobLogScreen(message.job))

    def on_jobs_table_stop_requested(self, message: JobsPanel.StopRequested) -> None:
        job = message.job
        if job.status not in ("waiting", "running"):
            self.notify(f"Job {job.id} has already ended ({job.status_text}).")
            return
        gpus = ",".join(str(i) for i in job.physical_indices)
        where = f"pid {job.pid}" if job.pid else "not started yet"
        question = Text.assemble(
            f"Stop job {job.id} (",
            plain(job.name),
            f") on GPU {gpus}, {where}?\n\n  ",
            plain(job.command_text),
            "\n\nSIGTERM to its whole process group, then SIGKILL if it has not ended "
            "after the grace period."
            if job.slurm_job_id is None
            else f"\n\nSlurm cancels it: scancel {job.slurm_job_id}.",
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._stop_job(job.id)

        from gputop.tui.screens.confirm import ConfirmScreen  # not before the first frame

        self.push_screen(ConfirmScreen(question, yes_label="Stop job"), answered)

    @work(thread=True, group="jobs-stop", exit_on_error=False)
    def _stop_job(self, job_id: int) -> None:
        try:
            text = self.jobs_service.stop(job_id)
        except GputopError as error:
            self.notify(str(error), severity="error")  # notify is thread-safe
        else:
            self.notify(text)
        self._refresh_jobs()
