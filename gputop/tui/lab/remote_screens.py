"""The launch dialog, the log view and a card's history for another host, over its ssh.

The launch dialog is the local one (same preview: the host's own snapshot, its cards'
pinning, its user's and jobs' warnings); only the launch itself differs: ``gputop run``
on that host (gputop/core/remote/remote_jobs.py). The log view reads ``gputop jobs log ID
--follow`` from the host; each line goes through the log follower's cleaning (colours
kept, every other control shown as an escape) before it is drawn. ``H`` on a card: the
one host's history screen, fed by the host's agent (in the screen's worker). docs/lab.md.
"""

from __future__ import annotations

import subprocess
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import IO

from rich.text import Text
from textual import work
from textual.widgets import Input, RichLog

from gputop.core.history.card_history import CardHistory
from gputop.core.job_columns import HostJob
from gputop.core.jobs.launch import LaunchRequest
from gputop.core.jobs.logs import shown_line
from gputop.core.jobs.usage import usage_summary
from gputop.core.remote.host_link import STDERR_TAIL_LINES, collect_tail
from gputop.core.remote.remote_jobs import (
    launch_answer,
    log_argv,
    run_argv,
    run_remote,
    start_remote,
)
from gputop.core.safe_text import clean
from gputop.tui.safe import plain
from gputop.tui.screens.card_history import render_card_history
from gputop.tui.screens.history_window import HistoryWindowScreen
from gputop.tui.screens.job_log import LogScreen, log_title
from gputop.tui.screens.launch import LaunchContext, LaunchScreen


class RemoteLaunchScreen(LaunchScreen):
    """The launch dialog for cards of another host; dismissed with None, the outcome
    notified (the job lives in that host's store, and its agent reports it)."""

    FILES_HERE = False  # that host's gputop looks for a file of the command's name

    def __init__(
        self, context: LaunchContext, host: str, ssh_environ: Mapping[str, str] | None
    ) -> None:
        super().__init__(context)
        self.host = host
        self.ssh_environ = ssh_environ

    def heading(self, cards: str) -> Text:
        title = Text.assemble("Launch on ", (clean(self.host), "bold cyan"), f": {cards}")
        title.stylize("bold")
        return title

    def on_mount(self) -> None:
        # Remote jobs run detached: tmux is this terminal's, and waiting is the host's.
        self.query_one("#mode").display = False
        self.query_one("#wait").display = False

    def _cwd(self) -> str | None:
        """The directory as typed: ``~`` means the home on that host, where gputop run
        expands it (gputop/core/jobs/launch.py); empty is the home there."""
        return self.query_one("#cwd", Input).value.strip() or None

    @work(thread=True, exclusive=True, group="launch", exit_on_error=False)
    def _launch(self, request: LaunchRequest) -> None:
        gpus = {g.physical_index: g for g in self.context.snapshot.gpus}
        uuids = []
        for target in request.physical_indices:
            if isinstance(target, str):
                uuids.append(target)
            elif target in gpus and gpus[target].uuid:
                uuids.append(str(gpus[target].uuid))
            else:
                self.app.call_from_thread(self._failed, f"GPU {target} has no UUID to pin by.")
                return
        command = request.command if isinstance(request.command, str) else " ".join(request.command)
        argv = run_argv(self.host, uuids, command, cwd=request.cwd, environ=self.ssh_environ)
        result = run_remote(argv, self.ssh_environ)
        if not result.ok:
            self.app.call_from_thread(self._failed, result.message or "the launch failed")
            return
        text = launch_answer(self.host, result)
        self.app.call_from_thread(self.app.notify, text)
        self.app.call_from_thread(self.dismiss, None)


MAX_LOG_LINE_BYTES = 64 * 1024
"""A remote log's line longer than this comes in pieces of it."""


def log_lines(stream: IO[bytes]) -> Iterator[str]:
    """Each line of a remote log as it comes, a longer one in pieces of ``MAX_LOG_LINE_BYTES``
    (held whole, a line without an end grew the dashboard without bound)."""
    while raw := stream.readline(MAX_LOG_LINE_BYTES):
        yield raw.decode("utf-8", "replace").rstrip("\r\n")


class RemoteLogScreen(LogScreen):
    def __init__(self, job: HostJob, ssh_environ: Mapping[str, str] | None) -> None:
        super().__init__()
        self.job = job
        self.ssh_environ = ssh_environ
        self._process: subprocess.Popen[bytes] | None = None

    def title_line(self) -> Text:
        job = self.job
        return log_title(job, plain(job.host_name, style="bold cyan"), usage_summary(job.usage))

    def on_mount(self) -> None:
        self._follow()

    def on_unmount(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()

    @work(thread=True, group="log", exit_on_error=False)
    def _follow(self) -> None:
        argv = log_argv(self.job.ssh_host, self.job.id, self.ssh_environ)
        try:
            process = start_remote(argv, self.ssh_environ)
        except OSError as error:
            self.app.call_from_thread(self._write, Text(f"(cannot run ssh: {error})", "red"))
            return
        self._process = process
        stdout: IO[bytes] | None = process.stdout
        assert stdout is not None
        # stderr read meanwhile, its last lines kept: a full pipe would stop ssh
        said: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        stderr_reader = threading.Thread(
            target=collect_tail, args=(process.stderr, said), daemon=True
        )
        stderr_reader.start()
        for text in log_lines(stdout):
            line = shown_line(text)
            self.app.call_from_thread(self._write, Text.from_ansi(line, end=""))
        process.wait()
        stderr_reader.join(5.0)
        if process.returncode not in (0, -15):
            why = " ".join(clean(line) for line in said if line.strip())
            note = f"(the log ended: {why or 'exit ' + str(process.returncode)})"
            self.app.call_from_thread(self._write, Text(note, style="red"))

    def _write(self, line: Text) -> None:
        if self.is_attached:
            self.query_one("#log", RichLog).write(line)


def stop_remote_job(job: HostJob, ssh_environ: Mapping[str, str] | None) -> str:
    """``gputop jobs stop ID --yes`` on the job's host: what it said, for a notice."""
    from gputop.core.remote.remote_jobs import stop_argv

    result = run_remote(stop_argv(job.ssh_host, job.id, ssh_environ), ssh_environ)
    where = clean(job.host_name)
    if result.ok:
        return f"{where}: {result.message or f'job {job.id} stopped'}"
    return f"{where}: could not stop job {job.id}: {result.message}"


ReadRemote = Callable[[int, float, float, int], CardHistory]
"""(physical index, window in seconds, now, columns) -> what the host answered."""


class RemoteCardHistoryScreen(HistoryWindowScreen):
    def __init__(self, host_name: str, physical_index: int, read: ReadRemote) -> None:
        super().__init__()
        self.host_name = host_name
        self.physical_index = physical_index
        self._read_remote = read

    def subject(self) -> Text:
        return Text.assemble(
            plain(self.host_name, style="bold"), (f"  GPU {self.physical_index}", "bold")
        )

    def read_history(self, window_s: float, now: float, columns: int) -> CardHistory:
        return self._read_remote(self.physical_index, window_s, now, columns)

    def render_history(self, found: object) -> Text:
        assert isinstance(found, CardHistory)
        return render_card_history(found)
