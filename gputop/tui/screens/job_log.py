"""A job's log, followed live like ``tail -f`` while the job runs.

The log is read in a worker thread (a slow disk never stalls the dashboard), in capped
increments from where the last read stopped, decoded incrementally so a character split
across two reads stays whole (:mod:`gputop.core.jobs.logs`). Each line keeps its
colours and nothing else: every other control character is shown as an escape before
``Text.from_ansi`` turns the colour sequences into styles. See docs/security.md.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import RichLog, Static
from textual.worker import Worker

from gputop.core.job_columns import HostJob
from gputop.core.jobs.logs import LogFollower, LogRead
from gputop.core.jobs.model import Job
from gputop.core.jobs.usage import usage_summary
from gputop.core.safe_text import clean
from gputop.tui.safe import plain, plain_content
from gputop.tui.workers import ReportsWorkerFailures

FOLLOW_EVERY_S = 0.5
READ_PER_TICK_BYTES = 256 * 1024
"""At most this much is read and drawn per tick (a few thousand lines: well under a second
of UI time); a job writing faster is followed from its tail, the skip said in the view."""
MAX_LINES_SHOWN = 20_000
"""Older lines scroll out of the view (the log file keeps them)."""


class LogScreen(ReportsWorkerFailures, ModalScreen[None]):
    """A job's log under a title line (``title``), this machine's or another host's."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        yield Static(self.title_line(), id="log-title")
        yield RichLog(id="log", max_lines=MAX_LINES_SHOWN, wrap=False, markup=False)

    def title_line(self) -> Text:
        raise NotImplementedError


def log_title(job: Job | HostJob, where: Text, usage: str) -> Text:
    """``Job 3 (train) on GPU 0,1: running   escape closes``, and what it used under it."""
    return Text.assemble(
        f"Job {job.id} (",
        plain(job.name),
        ") on ",
        where,
        ": ",
        plain(job.status_text),
        ("   escape closes", "dim"),
        "\n",
        (usage, "dim"),
    )


class JobLogScreen(LogScreen):
    def __init__(self, job: Job) -> None:
        super().__init__()
        self.job = job
        self._follower = LogFollower(job.log_path, max_read_bytes=READ_PER_TICK_BYTES)
        self._shown_missing = False
        self._last_error: str | None = None
        self._reader: Worker[None] | None = None

    def on_mount(self) -> None:
        self.query_one("#log", RichLog).border_title = plain_content(self.job.log_path)
        self.read_more()
        self.set_interval(FOLLOW_EVERY_S, self.read_more)

    def read_more(self) -> None:
        """Start a read unless one is still under way (one follower, one thread at a time)."""
        if self._reader is None or self._reader.is_finished:
            self._reader = self._read()

    def title_line(self) -> Text:
        usage = usage_summary(self.job.usage, self.job.usage_note)
        return log_title(self.job, Text(f"GPU {self.job.gpus_text}"), usage)

    def update_job(self, job: Job) -> None:
        """The dashboard passes each newer state of the job, for the title line."""
        if job.id == self.job.id and job != self.job:
            self.job = job
            self.query_one("#log-title", Static).update(self.title_line())

    @work(thread=True, group="log", exit_on_error=False)
    def _read(self) -> None:
        """Read what the job wrote since the last read, off the UI thread."""
        read = self._follower.read()
        # Only colour sequences are left in a line: from_ansi turns them into styles. Done
        # here, off the UI thread, for at most the lines the view keeps.
        shown = read.lines[-MAX_LINES_SHOWN:]
        lines = Text("\n").join(Text.from_ansi(line, end="") for line in shown) if shown else None
        if lines or read.restarted or read.skipped_bytes or read.missing or read.error:
            self.app.call_from_thread(self._show, read, lines)

    def _show(self, read: LogRead, lines: Text | None) -> None:
        log = self.query_one("#log", RichLog)
        if read.missing:
            if not self._shown_missing:
                self._shown_missing = True
                log.write(Text("(no log yet: the job has not started)", style="dim"))
            return
        if read.error is not None:
            if read.error != self._last_error:  # said once, not every half second
                self._last_error = read.error
                log.write(Text(f"(cannot read the log: {clean(read.error)})", style="red"))
            return
        self._last_error = None
        if read.restarted:
            log.clear()
        if read.skipped_bytes:
            kib = read.skipped_bytes // 1024
            log.write(Text(f"… {kib} KiB skipped: the job writes faster than shown …", "dim"))
        if lines is not None:
            log.write(lines)  # one write for the whole read: each write renders on its own
