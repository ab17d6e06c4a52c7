"""The dashboard application: sampling in a worker thread, rendering on the UI thread.

The worker reads one snapshot per interval, and the jobs gputop launched with it, and posts
both; a sample that has not been rendered yet is replaced by a newer one (``can_replace``),
so a slow terminal never queues stale frames. Widgets only render what they are given: no
NVML, psutil or job-store call happens on the UI thread.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.geometry import Size
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker

from gputop.core.errors import GputopError
from gputop.core.history.store import DB_NAME as HISTORY_DB_NAME
from gputop.core.history.store import default_history_path
from gputop.core.jobs.service import JobsService, JobsView
from gputop.core.jobs.store import JobStore
from gputop.core.model import ProcessOrigin, Snapshot
from gputop.core.process_control import signal_own_process
from gputop.core.safe_text import clean, clean_lines
from gputop.core.sampling.early import EarlySample
from gputop.core.sampling.history import UtilizationHistory, initial_history
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.slurm.submit import cancel as cancel_slurm_job
from gputop.core.slurm.watch import SlurmView, SlurmWatch
from gputop.core.users import current_user
from gputop.tui.jobs_actions import JobsActions, JobsRead, JobStoreProblem
from gputop.tui.keys import KEY_HELP
from gputop.tui.safe import plain_argv
from gputop.tui.screen_diff import driver_with_screen_diff, forget_screens
from gputop.tui.screens.confirm import ConfirmScreen
from gputop.tui.screens.help import HelpScreen
from gputop.tui.textual_compat import ExceptionHook, app_closing, textual_handles_exception
from gputop.tui.widgets.gpu_grid import MIN_CARD_WIDTH, GpuGrid
from gputop.tui.widgets.jobs_panel import JobsPanel
from gputop.tui.widgets.key_bar import KeyBar
from gputop.tui.widgets.process_table import ProcessTable
from gputop.tui.widgets.status_bar import HostBar, StatusBar
from gputop.tui.widgets.torch_panel import TorchPanel
from gputop.tui.workers import ReportsWorkerFailures, failure_message

MIN_TABLE_ROWS = 12
FIXED_LINES = 3
"""The status line, the host line and the key bar."""
CARD_HEIGHT = 8
STORE_RETRY_S = 5.0
"""How often the sampler tries again to open a job store it could not open (said once)."""


class SlurmRead(Message):
    """What Slurm says of this node's cards, the user's jobs and the GPU processes."""

    def __init__(self, view: SlurmView) -> None:
        super().__init__()
        self.view = view


class SnapshotSampled(Message):
    """A new snapshot and the jobs with it; it supersedes one still waiting in the queue."""

    def __init__(self, snapshot: Snapshot, jobs: JobsView | None) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.jobs = jobs

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotSampled)


class SamplingFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class _ReportedByGputop(Exception):
    """The error that stopped the dashboard, which gputop reports itself in one line."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error

    def __rich__(self) -> Text:
        return Text()


class GputopApp(ExceptionHook, ReportsWorkerFailures, JobsActions):
    CSS_PATH = "gputop.tcss"
    TITLE = "gputop"
    ENABLE_COMMAND_PALETTE = True

    # The key bar shows these in this order and cuts what does not fit: at 80 columns, after
    # how to leave and the help, the launch, the selection it uses and the jobs.
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Keys"),
        Binding("l", "launch", "Launch"),
        Binding("space", "toggle_card", "Select card"),
        Binding("J", "toggle_jobs", "Jobs"),
        Binding("a", "select_all", "All cards"),
        Binding("escape", "clear_selection", "Clear selection", show=False),
        Binding("f", "filter_card", "Filter"),
        Binding("slash", "filter_text", "Filter by text", show=False),
        Binding("u", "only_mine", "Only mine", show=False),
        Binding("s", "cycle_sort", "Sort"),
        Binding("S", "reverse_sort", "Reverse sort", show=False),
        Binding("p", "toggle_torch", "PyTorch view"),
        Binding("H", "card_history", "Card history", show=False),
        Binding("t", "signal_process('SIGTERM')", "Terminate"),
        Binding("T", "signal_process('SIGKILL')", "Kill", show=False),
        Binding("ctrl+l", "redraw", "Redraw the screen", show=False),
    ]

    def __init__(
        self,
        backend: NvmlBackend,
        *,
        interval_s: float = 1.0,
        readonly: bool = False,
        python: str | None = None,
        environ: Mapping[str, str] | None = None,
        history: UtilizationHistory | None = None,
        probes: bool = True,
        user: str | None = None,
        state_dir: Path | None = None,
        cwd: str | None = None,
        job_environ: Mapping[str, str] | None = None,
        first_sample: EarlySample | None = None,
    ) -> None:
        super().__init__()
        self.backend = backend
        self._first_sample = first_sample
        """The first sample, read while the interface started (gputop.core.sampling.early)."""
        self._shown_first: Snapshot | None = None
        self.interval_s = interval_s
        self.readonly = readonly
        self.python = python
        self.environ = dict(environ) if environ is not None else None
        self.history = history or initial_history(backend.nvml)
        self.probes = probes
        self.snapshot: Snapshot | None = None
        self.compact = False
        self.user = user or current_user()
        self.history_store = (
            state_dir / HISTORY_DB_NAME if state_dir is not None else default_history_path()
        )
        """Where ``gputop record`` writes by default: what ``H`` reads (docs/history.md)."""
        self.jobs_service = JobsService(
            state_dir,
            user=self.user,
            cwd=cwd or os.getcwd(),
            job_environ=job_environ,
            report=self.report_jobs_problem,
            cancel_in_slurm=cancel_slurm_job,
        )
        self._stop = threading.Event()
        self.slurm_watch = SlurmWatch.for_environment(
            os.environ if self.environ is None else self.environ, self.user
        )
        """Where Slurm's commands are here: who holds each card (docs/slurm.md)."""
        self._slurm_error: str | None = None
        self.sampling_error: str | None = None
        """The error of the last sample while sampling fails; None while it works."""
        self._failures_reported: set[str] = set()
        self.fatal_error: BaseException | None = None
        """What stopped the app, if something did: ``gputop`` reports it in one line."""

    # -- one policy for messages and failures ---------------------------------------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notification is plain text, cleaned: messages quote data (names, paths).

        ``markup`` is accepted for Textual's own callers and ignored: see docs/security.md.
        """
        super().notify(
            clean_lines(message),
            title=clean(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def report_worker_failure(self, worker: Worker[object]) -> None:
        """A worker raised: say so once for its kind of work; the dashboard goes on."""
        if worker.group in self._failures_reported:
            return
        self._failures_reported.add(worker.group)
        self.notify(failure_message(worker), severity="error", timeout=10)

    def exception_reached_textual(self, error: Exception) -> None:
        """An exception reached Textual: keep the terminal, end with one line, not a traceback.

        Textual has no public hook for this (gputop/tui/textual_compat.py), and this only
        hands Textual an exception that renders as nothing (Textual then exits through its
        public ``panic``, restoring the terminal, with status 1); ``gputop`` prints one line
        naming the real error. ``GPUTOP_DEBUG=1`` shows Textual's traceback instead.
        Checked against the pinned Textual by tests/tui/test_dashboard_resilience.py.
        """
        if os.environ.get("GPUTOP_DEBUG"):
            textual_handles_exception(self, error)
            return
        if self.fatal_error is None:
            self.fatal_error = error
        textual_handles_exception(self, _ReportedByGputop(error))

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, writing only changed cells unless ``GPUTOP_SCREEN_DIFF=0``."""
        return driver_with_screen_diff(super().get_driver_class(), os.environ)

    # -- layout --------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield HostBar(id="host")
        yield GpuGrid(id="cards")
        with Horizontal(id="lower"):
            with Vertical(id="left"):
                yield ProcessTable(user=self.user, id="processes")
                yield JobsPanel(id="jobs")
            yield TorchPanel(
                environ=self.environ, python=self.python, probes=self.probes, id="torch"
            )
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(GpuGrid).focus()
        if not self._show_first_sample():
            self.query_one(StatusBar).show_waiting(self.interval_s)
        self._sample_forever()

    def _show_first_sample(self) -> bool:
        """Paint the first sample in the first frame, if it was read while Textual started.

        Its jobs follow from the sampling thread, which reads them for this same snapshot.
        A first sample that failed is left to the sampling thread, which samples again and
        reports what fails.
        """
        early = self._first_sample
        if early is None or not early.ready():
            return False
        self._first_sample = None
        try:
            snapshot = early.take()
        except Exception:
            return False
        self._shown_first = snapshot
        self._show_sample(SnapshotSampled(snapshot, None))
        return True

    def _next_sample(self) -> tuple[Snapshot, bool]:
        """In the sampling thread: the next sample, and whether it is already on screen.

        The first one may have been read early (and shown by ``on_mount``, or not yet).
        """
        shown, self._shown_first = self._shown_first, None
        if shown is not None:
            return shown, True
        early, self._first_sample = self._first_sample, None
        return (early.take() if early is not None else self.backend.sample()), False

    def on_unmount(self) -> None:
        self._stop.set()

    def on_resize(self, event: events.Resize) -> None:
        # The event's size, not ``self.size``: this handler runs before the app records the
        # new size, and the layout would follow the size before the resize.
        self._apply_size(event.size)

    def _apply_size(self, size: Size | None = None) -> None:
        count = len(self.snapshot.gpus) if self.snapshot else 0
        width, height = size or self.size
        columns = max(1, min(max(count, 1), width // MIN_CARD_WIDTH))
        card_rows = math.ceil(max(count, 1) / columns) * CARD_HEIGHT
        compact = width < 100 or height - card_rows - FIXED_LINES < MIN_TABLE_ROWS
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "-compact")
            if self.snapshot is not None:
                self._render_snapshot(self.snapshot)

    # -- sampling ------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="sampler", exit_on_error=False)
    def _sample_forever(self) -> None:
        store = self.jobs_service.open_store()
        reopen_at = time.monotonic() + STORE_RETRY_S
        jobs_failed = False
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                if store is None and started >= reopen_at:  # unusable at first: try again
                    store, reopen_at = self.jobs_service.open_store(), started + STORE_RETRY_S
                try:
                    snapshot, shown = self._next_sample()
                except GputopError as error:
                    self.post_message(SamplingFailed(str(error)))
                except Exception as error:  # a bad sample must not kill the dashboard
                    self.post_message(SamplingFailed(f"{type(error).__name__}: {error}"))
                else:
                    self._read_slurm(store, snapshot)
                    try:
                        jobs = self.jobs_service.read(store, snapshot)
                    except Exception as error:  # nor must a job store gone wrong (said once)
                        if not jobs_failed:
                            text = f"Jobs unavailable: {type(error).__name__}: {error}"
                            self.post_message(JobStoreProblem(text, severity="error"))
                        jobs, jobs_failed = None, True
                    if not shown:
                        self.post_message(SnapshotSampled(snapshot, jobs))
                    elif jobs is not None:  # the first frame showed the sample: its jobs
                        self.post_message(JobsRead(jobs))
                self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
        finally:
            if store is not None:
                store.close()

    def _read_slurm(self, store: JobStore | None, snapshot: Snapshot) -> None:
        """In the sampling thread: Slurm's view, before the jobs (it updates Slurm jobs)."""
        if self.slurm_watch is None:
            return
        pids = [p.pid for gpu in snapshot.gpus for p in gpu.processes if p.pid > 0]
        try:
            self.post_message(SlurmRead(self.slurm_watch.read(store, pids)))
        except Exception as error:  # Slurm gone wrong never stops the dashboard
            self.post_message(
                SlurmRead(SlurmView(node="", error=f"{type(error).__name__}: {error}"))
            )

    def on_slurm_read(self, message: SlurmRead) -> None:
        view = message.view
        if view.error and view.error != self._slurm_error:
            self.notify(f"Slurm: {clean(view.error)}", severity="warning", timeout=10)
        self._slurm_error = view.error
        try:
            self.query_one(GpuGrid).show_slurm(
                {i: label for i in view.holders if (label := view.card_label(i)) is not None}
            )
            self.query_one(ProcessTable).set_slurm_jobs(view.process_jobs)
            self.query_one(JobsPanel).show_slurm(view.user_jobs)
        except NoMatches:
            if self.is_running and not app_closing(self):
                raise

    def on_snapshot_sampled(self, message: SnapshotSampled) -> None:
        try:
            self._show_sample(message)
        except NoMatches:
            if self.is_running and not app_closing(self):
                raise
            # A sample that arrives while the app closes finds its widgets gone: drop it.

    def _show_sample(self, message: SnapshotSampled) -> None:
        first = self.snapshot is None
        if self.sampling_error is not None:
            self.sampling_error = None
            self.notify("Sampling works again.", timeout=5)
        self.snapshot = message.snapshot
        self.history.add(message.snapshot)
        if message.jobs is not None:
            self._show_jobs(message.jobs)
        if first:
            self._apply_size()
        self._render_snapshot(message.snapshot)

    def on_sampling_failed(self, message: SamplingFailed) -> None:
        """Said once while sampling fails (not every interval); the last frame stays."""
        first = self.sampling_error is None
        self.sampling_error = message.error
        if first:
            self.notify(
                f"Sampling failed: {message.error}. gputop keeps trying and says when it works "
                "again.",
                severity="error",
                timeout=10,
            )

    def _render_snapshot(self, snapshot: Snapshot) -> None:
        self.query_one(StatusBar).show(snapshot, self.interval_s)
        self.query_one(HostBar).show(snapshot)
        self.query_one(GpuGrid).show(snapshot, self.history, self.compact)
        self.query_one(ProcessTable).show(snapshot)
        self.query_one(TorchPanel).show(snapshot)

    def on_process_table_detail_requested(self, message: ProcessTable.DetailRequested) -> None:
        if self.snapshot is not None:
            # Imported at first use, as the history screens below: not on the way to the
            # first frame (docs/speed.md).
            from gputop.tui.screens.process_detail import ProcessDetailScreen

            self.push_screen(
                ProcessDetailScreen(self.snapshot, message.process, self.history_store, self._now)
            )

    def on_gpu_grid_selection_changed(self, message: GpuGrid.SelectionChanged) -> None:
        table = self.query_one(ProcessTable)
        if table.only_gpu is not None and message.highlighted is not None:
            table.toggle_filter(message.highlighted, follow=True)
        self.query_one(TorchPanel).set_selection(message.cards)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """Textual's commands, and every gputop action by name (gputop.tui.palette)."""
        from gputop.tui.palette import palette_commands

        textual_keys = (self.action_show_help_panel, self.action_hide_help_panel)
        for command in super().get_system_commands(screen):
            if command.callback in textual_keys:
                # Textual's key panel lists Textual's keys (copy, ...) and escape leaves it
                # open: "Keys" is gputop's help, as on ?
                yield SystemCommand("Keys", "gputop's keys and what they do (?)", self.action_help)
            else:
                yield command
        if screen is self.screen_stack[0]:  # the dashboard, not a dialog over it
            yield from palette_commands(self, screen)

    # -- actions -------------------------------------------------------------------------

    def action_redraw(self) -> None:
        """Repaint every cell, and send every cell: the screen diff forgets what it sent."""
        forget_screens()
        self.screen.refresh(self.screen.region)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):  # the palette's Keys over the help
            self.push_screen(HelpScreen(KEY_HELP))

    def action_card_history(self) -> None:
        highlighted = self.query_one(GpuGrid).highlighted
        if highlighted is None:
            self.notify("No card highlighted.")
            return
        from gputop.tui.screens.card_history import CardHistoryScreen

        self.push_screen(CardHistoryScreen(highlighted, self.history_store, self._now))

    def action_process_history(self) -> None:
        process = self.query_one(ProcessTable).current_process
        if process is None:
            self.notify("No process highlighted.")
            return
        from gputop.tui.screens.process_history import ProcessHistoryScreen

        self.push_screen(ProcessHistoryScreen(process, self.history_store, self._now))

    def _now(self) -> float:
        """The time history windows end at: the simulated clock's on simulated GPUs."""
        clock = getattr(self.backend.nvml, "epoch_time", None)
        return float(clock()) if callable(clock) else time.time()

    def action_toggle_card(self) -> None:
        self.query_one(GpuGrid).toggle_highlighted()

    def action_select_all(self) -> None:
        self.query_one(GpuGrid).select_all()

    def action_clear_selection(self) -> None:
        self.query_one(GpuGrid).clear_selection()

    def action_filter_card(self) -> None:
        table = self.query_one(ProcessTable)
        table.toggle_filter(self.query_one(GpuGrid).highlighted)
        self.notify(table.describe_view(), timeout=2)

    def action_filter_text(self) -> None:
        from gputop.tui.screens.filter import FilterScreen

        table = self.query_one(ProcessTable)

        def answered(text: str | None) -> None:
            if text is not None:
                table.set_text_filter(text)
                self.notify(table.describe_view(), timeout=2)

        self.push_screen(FilterScreen(table.text_filter), answered)

    def action_only_mine(self) -> None:
        table = self.query_one(ProcessTable)
        table.toggle_only_mine()
        self.notify(table.describe_view(), timeout=2)

    def action_cycle_sort(self) -> None:
        table = self.query_one(ProcessTable)
        table.next_sort()
        self.notify(table.describe_view(), timeout=2)

    def action_reverse_sort(self) -> None:
        table = self.query_one(ProcessTable)
        table.toggle_reverse()
        self.notify(table.describe_view(), timeout=2)

    def action_toggle_torch(self) -> None:
        self.toggle_class("-torch-hidden" if not self.compact else "-torch-shown")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "signal_process" and self.readonly:
            return None  # shown disabled: --readonly turns signalling off
        return True

    def action_signal_process(self, signal_name: str) -> None:
        if self.readonly:
            self.notify("Read-only mode: gputop will not signal processes.", severity="warning")
            return
        process = self.query_one(ProcessTable).current_process
        if process is None:
            self.notify("No process highlighted: press tab to reach the process table.")
            return
        if process.origin is ProcessOrigin.FOREIGN:
            # Foreign: NVML's pid is no process of this PID namespace, or an unrelated one
            # that merely shares the number (gputop.core.sampling.pid_namespace).
            self.notify(
                f"Process {process.pid} is not a process of this machine's view "
                f"({process.hint or process.origin.value}); gputop will not signal it.",
                severity="warning",
                markup=False,
            )
            return
        if process.user != self.user:
            self.notify(
                f"Process {process.pid} belongs to {clean(process.user or 'another user')}; "
                "gputop only signals your own processes.",
                severity="warning",
            )
            return
        signum = signal.Signals[signal_name]
        question = Text.assemble(
            f"Send {signal_name} to process {process.pid} on GPU {process.physical_index}?\n\n  ",
            plain_argv(process.command) if process.command else "?",
        )

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            if process.origin is ProcessOrigin.SIMULATED:  # the dialog shows what it would do
                self.notify(
                    f"Process {process.pid} is simulated (--fake): there is no such process "
                    "on this machine, so nothing was sent. A job you launch here (l) is real, "
                    "and t reaches it.",
                    severity="warning",
                )
                return
            try:
                signal_own_process(process.pid, process.start_time, signum)
            except GputopError as error:
                self.notify(str(error), severity="error")
            else:
                self.notify(f"Sent {signal_name} to process {process.pid}.")

        self.push_screen(ConfirmScreen(question, yes_label=f"Send {signal_name}"), answered)
