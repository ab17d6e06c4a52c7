"""What the local dashboard and the lab dashboard share: one small base under both.

``DashboardApp`` owns the driver (the screen diff), the one policy for messages and
failures (every notification cleaned, a failing worker said once, an exception that reaches
Textual ended in one line), this machine's job service (the launch dialog's history and
local launches, in both), and the keys and actions both have alike. Each dashboard adds its
layout, its sampling and the actions that depend on them: ``GputopApp`` (app.py) one host
through NVML, ``LabApp`` (lab/lab_app.py) many through the lab's links. Textual runs the
``on_mount`` of every class in the chain: each dashboard's, then the base's.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypedDict, cast

from rich.text import Text
from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.driver import Driver
from textual.geometry import Size
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.reactive import var
from textual.screen import Screen
from textual.widget import Widget
from textual.worker import Worker

from gputop.core import settings
from gputop.core.errors import GputopError
from gputop.core.history.store import DB_NAME as HISTORY_DB_NAME
from gputop.core.history.store import default_history_path
from gputop.core.jobs.service import JobsService, Severity
from gputop.core.model import GpuHealth, GpuProcess, GpuSample, ProcessOrigin
from gputop.core.process_control import current_boot_id, signal_own_process
from gputop.core.records import mutable
from gputop.core.safe_text import clean, clean_lines
from gputop.core.users import current_user
from gputop.tui.collector import SETTLE_AFTER_S, settle_collector
from gputop.tui.diff_driver import driver_with_screen_diff, forget_screens
from gputop.tui.keys import KEY_HELP
from gputop.tui.safe import plain_argv
from gputop.tui.suspend import SUSPEND_BINDING, SuspendsToShell
from gputop.tui.textual_compat import (
    QUIT_HINT_BINDING,
    ExceptionHook,
    QuitHint,
    install_lean_filter,
    install_lean_strips,
    install_lean_styles,
    install_partial_updates,
    install_quiet_frame_timer,
    textual_handles_exception,
)
from gputop.tui.widgets.process_table import ProcessTable
from gputop.tui.workers import ReportsWorkerFailures, failure_message

MIN_TABLE_ROWS = 12
"""The fewest lines the process table keeps below the cards before the layout is compact."""


def _cancel_slurm_job(slurm_job_id: int) -> None:
    """``scancel``, imported when a job is first stopped: not before the first frame."""
    from gputop.core.slurm.submit import cancel

    cancel(slurm_job_id)


class _ReportedByGputop(Exception):
    """The error that stopped the dashboard, which gputop reports itself in one line."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error

    def __rich__(self) -> Text:
        return Text()


@mutable
class JobStoreProblem(Message):
    """The job store said something a person must know (moved aside, unreadable)."""

    text: str
    severity: SeverityLevel


class CardGrid(Protocol):
    """What both grids (``GpuGrid``, the lab's ``LabGrid``) do on the selection's keys."""

    def toggle_highlighted(self) -> None: ...
    def select_all(self) -> None: ...
    def clear_selection(self) -> None: ...


class DashboardOptions(TypedDict, total=False):
    """What each dashboard passes on to ``DashboardApp``: ``**options: Unpack[...]``."""

    interval_s: float
    readonly: bool
    user: str | None
    state_dir: Path | None
    cwd: str | None
    job_environ: Mapping[str, str] | None
    tune_collector: bool


class DashboardApp(QuitHint, SuspendsToShell, ExceptionHook, ReportsWorkerFailures, App[None]):
    """The base of both dashboards; each subclass composes its widgets, mounts, samples."""

    CSS_PATH = str(Path(__file__).parent / "gputop.tcss")
    """Absolute: Textual reads a relative path beside the module of the running app's class."""
    TITLE = "gputop"
    GRID = "#cards"
    """The grid of cards, a ``CardGrid``."""
    ENABLE_COMMAND_PALETTE = True
    compact = var(False, init=False, toggle_class="-compact")
    """The small terminal's layout: one lower panel, the PyTorch view only on p (gputop.tcss)."""
    jobs_shown = var(False, init=False, toggle_class="-jobs-shown")
    _focus_before_jobs: Widget | None = None
    """Where the keys were when J showed the jobs."""
    _focus_before_torch: Widget | None = None
    """Where the keys were when p showed the PyTorch view over the lower panel (80x24)."""
    _focus_before_compact: Widget | None = None
    """Where the keys were when the terminal became small (the compact layout)."""
    torch_hidden = var(False, init=False, toggle_class="-torch-hidden")
    """p on a large terminal; on a small one p shows it over the jobs (``torch_shown``)."""
    torch_shown = var(False, init=False, toggle_class="-torch-shown")

    # The key bar shows these in this order and cuts what does not fit: at 80 columns, after
    # how to leave and the help, the launch, the selection it uses and the jobs. Each
    # dashboard has every one of these actions (the launch and the jobs its own way).
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        SUSPEND_BINDING,
        QUIT_HINT_BINDING,
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
        Binding("o", "resort", "Re-sort now", show=False),
        Binding("p", "toggle_torch", "PyTorch view"),
        Binding("H", "card_history", "Card history", show=False),
        Binding("t", "signal_process('SIGTERM')", "Terminate"),
        Binding("T", "signal_process('SIGKILL')", "Kill", show=False),
        Binding("ctrl+l", "redraw", "Redraw the screen", show=False),
    ]

    def __init__(
        self,
        *,
        interval_s: float = 1.0,
        readonly: bool = False,
        user: str | None = None,
        state_dir: Path | None = None,
        cwd: str | None = None,
        job_environ: Mapping[str, str] | None = None,
        tune_collector: bool = False,
    ) -> None:
        super().__init__()
        install_partial_updates()  # every frame asks only for what it writes
        install_lean_strips()  # and makes no caches it does not use
        install_lean_styles()  # and reads a widget's styles once a paint
        install_lean_filter()  # and makes a style's colours truecolor once
        install_quiet_frame_timer()  # and its frame timer sleeps while paused
        self.interval_s = interval_s
        self.readonly = readonly
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
            cancel_in_slurm=_cancel_slurm_job,
        )
        self._stop = threading.Event()
        """Set when the app unmounts: the sampling thread ends at its next wait."""
        self._failures_reported: set[str] = set()
        self.fatal_error: BaseException | None = None
        """What stopped the app, if something did: ``gputop`` reports it in one line."""
        self._tune_collector = tune_collector
        """The process is gputop's own: tune its garbage collector once started
        (gputop/tui/collector.py); never in a process that runs apps in tests."""

    def settle_collector_later(self) -> None:
        """From each dashboard's ``on_mount``: the collector settled once start-up is over."""
        if self._tune_collector:
            self.set_timer(SETTLE_AFTER_S, settle_collector)

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

    def report_jobs_problem(self, text: str, severity: Severity) -> None:
        """The job service's ``report`` callback: thread-safe, it only posts a message."""
        self.post_message(JobStoreProblem(text, severity))

    def on_job_store_problem(self, message: JobStoreProblem) -> None:
        self.notify(message.text, severity=message.severity, timeout=10)

    def exception_reached_textual(self, error: Exception) -> None:
        """An exception reached Textual: keep the terminal, end with one line, not a traceback.

        Textual has no public hook for this (gputop/tui/textual_compat/), and this only
        hands Textual an exception that renders as nothing (Textual then exits through its
        public ``panic``, restoring the terminal, with status 1); ``gputop`` prints one line
        naming the real error. ``settings.DEBUG`` shows Textual's traceback instead.
        Checked against the pinned Textual by tests/tui/test_dashboard_resilience.py.
        """
        if settings.DEBUG.on():
            textual_handles_exception(self, error)
            return
        if self.fatal_error is None:
            self.fatal_error = error
        textual_handles_exception(self, _ReportedByGputop(error))

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, writing only changed cells unless ``settings.SCREEN_DIFF`` is off."""
        return driver_with_screen_diff(super().get_driver_class(), os.environ)

    # -- size and end ----------------------------------------------------------------------

    def on_mount(self) -> None:
        # Resumed after ctrl+z (fg): the terminal shows what the shell left, as for ctrl+l.
        self.app_resume_signal.subscribe(self, lambda _app: self.action_redraw())

    def on_unmount(self) -> None:
        self._stop.set()

    def on_resize(self, event: events.Resize) -> None:
        # The event's size, not ``self.size``: this handler runs before the app records the
        # new size, and the layout would follow the size before the resize.
        self._apply_size(event.size)

    def _apply_size(self, size: Size | None = None) -> None:
        """The layout for ``size`` (else the app's): each dashboard's own."""

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
            self.jobs_table()  # its keys too, where it is mounted when first needed
            yield from palette_commands(self, screen)

    # -- actions both dashboards do alike -----------------------------------------------

    def action_redraw(self) -> None:
        """Repaint every cell, and send every cell: the screen diff forgets what it sent."""
        forget_screens()
        self.screen.refresh(self.screen.region)

    def action_help(self) -> None:
        from gputop.tui.screens.help import HelpScreen  # not before the first frame

        if not isinstance(self.screen, HelpScreen):  # the palette's Keys over the help
            self.push_screen(HelpScreen(KEY_HELP))

    def show_card_health(
        self,
        card_now: Callable[[], GpuSample | None],
        none: str,
        host: str | None,
        index: int | None,
    ) -> None:
        """``e``: the health screen of the card ``card_now()`` finds, read again at each
        refresh of the screen; ``none`` said where there is no card."""
        card = card_now()
        if card is None:
            self.notify(none)
            return
        from gputop.tui.screens.health import HealthScreen

        def health() -> GpuHealth | None:
            now = card_now()
            return None if now is None else now.health

        title = " ".join(filter(None, [host, f"GPU {index}", card.name, "health"]))
        self.push_screen(HealthScreen(title, health))

    def _now(self) -> float:
        """The time history windows end at."""
        return time.time()

    def action_process_history(self) -> None:
        """The history of the highlighted process of this machine (``gputop record``'s)."""
        process = self.query_one(ProcessTable).current_process
        if process is None:
            self.notify("No process highlighted.")
            return
        from gputop.tui.screens.process_history import ProcessHistoryScreen

        self.push_screen(ProcessHistoryScreen(process, self.history_store, self._now))

    def action_filter_text(self) -> None:
        from gputop.tui.screens.filter import FilterScreen

        table = self.query_one(ProcessTable)

        def answered(text: str | None) -> None:
            if text is not None:
                self.change_view(lambda table: table.set_text_filter(text))

        self.push_screen(FilterScreen(table.text_filter), answered)

    def change_view(self, change: Callable[[Any], object]) -> None:
        """``change(table)`` on the process table (the lab's: ``LabProcessTable``), then say
        what it now shows."""
        table = self.query_one(ProcessTable)
        change(table)
        self.notify(table.describe_view(), timeout=2)

    def action_only_mine(self) -> None:
        self.change_view(ProcessTable.toggle_only_mine)

    def action_cycle_sort(self) -> None:
        self.change_view(ProcessTable.next_sort)

    def action_reverse_sort(self) -> None:
        self.change_view(ProcessTable.toggle_reverse)

    def action_toggle_card(self) -> None:
        cast(CardGrid, self.query_one(self.GRID)).toggle_highlighted()

    def action_select_all(self) -> None:
        cast(CardGrid, self.query_one(self.GRID)).select_all()

    def action_clear_selection(self) -> None:
        cast(CardGrid, self.query_one(self.GRID)).clear_selection()

    def action_resort(self) -> None:
        """Sort the processes exactly now: rows held by the margin move (row_order.py)."""
        self.query_one(ProcessTable).resort()

    def watch_compact(self) -> None:
        screen = self.screen_stack[0] if self.screen_stack else None
        if self.compact:  # it hides the PyTorch view: the keys it had go to the cards
            self.keep_focus_shown()
            self.call_after_refresh(self._note_focus_hidden, screen and screen.focused)
            return
        # A larger terminal again: the panel the small one hid gets back the keys it took
        # from it, unless they were given to another panel meanwhile.
        back, self._focus_before_compact = self._focus_before_compact, None
        self.call_after_refresh(self._give_focus_back, back)

    def _note_focus_hidden(self, before: Widget | None) -> None:
        screen = self.screen_stack[0] if self.screen_stack else None
        hidden = screen is not None and before is not None and before not in screen.focus_chain
        self._focus_before_compact = before if hidden else None

    def _give_focus_back(self, back: Widget | None) -> None:
        screen = self.screen_stack[0] if self.screen_stack else None
        if screen is None or self.screen is not screen or back is None:
            return  # a dialog is open: Textual gives the dashboard its focus when it closes
        chain = screen.focus_chain
        if back in chain and screen.focused is chain[0]:  # still where the small one put them
            back.focus()

    def action_toggle_torch(self) -> None:
        if not self.compact:
            self.torch_hidden = not self.torch_hidden
            self.keep_focus_shown()
            return
        # Small terminals show one lower panel: the view takes the keys the panel it covers
        # had, and p again gives them back, as J does.
        self.torch_shown = not self.torch_shown
        if self.torch_shown:
            self._focus_before_torch = self.screen.focused
            self.keep_focus_shown(next(iter(self.query("#torch")), None))
        else:
            self.keep_focus_shown(self._focus_before_torch)

    def action_toggle_jobs(self) -> None:
        # Small terminals show one lower panel: J brings the jobs back over the PyTorch view.
        covered = self.compact and self.torch_shown
        self.torch_shown = False
        self.jobs_shown = covered or not self.jobs_shown
        if self.jobs_shown:
            self._focus_before_jobs = self.screen.focused  # J again gives the keys back there
            self.jobs_table().focus()
        else:
            self.keep_focus_shown(self._focus_before_jobs)

    def jobs_table(self) -> Widget:
        """The jobs panel's table (the local dashboard's is mounted when first needed)."""
        return self.query_one("#jobs")

    def keep_focus_shown(self, back: Widget | None = None) -> None:
        """Once the layout has changed (p, J, a launch, a smaller terminal): where it hid the
        panel that had the focus, the focus goes to ``back`` where it is shown, else to the
        first panel shown (the cards), never to nothing, where no key would reach a panel."""
        screen = self.screen_stack[0] if self.screen_stack else None
        before = screen.focused if screen is not None else None
        self.call_after_refresh(self._focus_a_shown_panel, before, back)

    def _focus_a_shown_panel(self, before: Widget | None, back: Widget | None = None) -> None:
        screen = self.screen_stack[0] if self.screen_stack else None
        if screen is None or self.screen is not screen:
            return  # a dialog is open: the dashboard's focus comes back when it closes
        chain = screen.focus_chain
        # Textual hands the focus of a widget it hides to a neighbour, or to none: the cards
        # take it instead, wherever the hidden panel was.
        hidden = before is not None and before not in chain
        if chain and (hidden or screen.focused not in chain):
            (back if back in chain else chain[0]).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "signal_process" and self.readonly:
            return None  # shown disabled: --readonly turns signalling off
        return True

    def action_signal_process(self, signal_name: str) -> None:
        """Signal the highlighted process, once asked (yours only)."""
        if self.readonly:
            self.notify("Read-only mode: gputop will not signal processes.", severity="warning")
            return
        process = self.query_one(ProcessTable).current_process
        if process is None:
            self.notify("No process highlighted: press tab to reach the process table.")
            return
        self.signal_process(process, signal_name)

    def signal_process(self, process: GpuProcess, signal_name: str) -> None:
        """``process`` of this machine (the lab's on another host: ``LabApp``'s)."""
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
                signal_own_process(
                    process.pid,
                    process.start_time,
                    signum,
                    # its ticks were read in this boot (this dashboard's): a step of the
                    # clock since it was first seen moved its start time, never them
                    start_ticks=process.start_ticks,
                    boot_id=current_boot_id() if process.start_ticks is not None else None,
                )
            except GputopError as error:
                self.notify(str(error), severity="error")
            else:
                self.notify(f"Sent {signal_name} to process {process.pid}.")

        from gputop.tui.screens.confirm import ConfirmScreen  # not before the first frame

        self.push_screen(ConfirmScreen(question, yes_label=f"Send {signal_name}"), answered)
