"""A job's log, followed live like ``tail -f`` while the job runs.

The log is read in small increments from where the last read stopped, so a job that
writes gigabytes costs the dashboard only what it wrote since the last tick.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Log, Static

from gputop.core.jobs.model import Job

FIRST_READ_BYTES = 256 * 1024
"""How much of an existing log to show at first: its end, like ``tail``."""
FOLLOW_EVERY_S = 0.5


class JobLogScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, job: Job) -> None:
        super().__init__()
        self.job = job
        self._offset = 0
        self._partial = ""

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="log-title")
        yield Log(id="log", highlight=False, auto_scroll=True)

    def on_mount(self) -> None:
        self.query_one("#log", Log).border_title = self.job.log_path
        self.read_more(first=True)
        self.set_interval(FOLLOW_EVERY_S, self.read_more)

    def _title(self) -> str:
        job = self.job
        return (
            f"Job {job.id} ({job.name}) on GPU {job.gpus_text}: {job.status_text}"
            "   [dim]escape closes[/]"
        )

    def update_job(self, job: Job) -> None:
        """The dashboard passes each newer state of the job, for the title line."""
        if job.id == self.job.id and job != self.job:
            self.job = job
            self.query_one("#log-title", Static).update(self._title())

    def read_more(self, first: bool = False) -> None:
        try:
            with open(self.job.log_path, "rb") as log:
                size = log.seek(0, 2)
                if size < self._offset:  # truncated or replaced: start again
                    self._offset, self._partial = 0, ""
                    self.query_one("#log", Log).clear()
                if first and size > FIRST_READ_BYTES:
                    self._offset = size - FIRST_READ_BYTES
                log.seek(self._offset)
                data = log.read()
        except FileNotFoundError:
            if first:
                self.query_one("#log", Log).write_line("(no log yet: the job has not started)")
            return
        except OSError as error:
            self.query_one("#log", Log).write_line(f"(cannot read the log: {error})")
            return
        if not data:
            return
        self._offset += len(data)
        text = self._partial + data.decode("utf-8", "replace")
        lines = text.split("\n")
        self._partial = lines.pop()  # an unfinished line waits for its end
        if lines:
            self.query_one("#log", Log).write_lines(line.rsplit("\r", 1)[-1] for line in lines)
