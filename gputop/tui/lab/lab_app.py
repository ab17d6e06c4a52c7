"""The dashboard across hosts (``gputop --hosts``): fed by the lab's links, not by NVML.

A worker reads every host's latest status once per interval (each link keeps its own; see
gputop/core/remote/lab.py) and posts them; the UI thread only draws. The source is
injectable (anything with ``statuses()``), so tests drive the dashboard with fixed hosts.
See docs/lab.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.message import Message
from textual.widgets import Static

from gputop.core.free_cards import FreePolicy
from gputop.core.history.card_history import CardHistory
from gputop.core.install_advice import install_advice
from gputop.core.job_columns import HostJob
from gputop.core.model import GpuProcess, GpuSample
from gputop.core.records import mutable
from gputop.core.remote.agent_version import older_note
from gputop.core.remote.host_jobs import host_jobs, left_out
from gputop.core.remote.host_summary import summarize
from gputop.core.remote.lab_history import HISTORY_TIMEOUT_S, HistoryAsk
from gputop.core.remote.remote_jobs import run_remote, signal_argv
from gputop.core.remote.status import HostStatus, LinkState, Mode
from gputop.core.safe_text import clean
from gputop.tui.dashboard_base import MIN_TABLE_ROWS, DashboardApp, DashboardOptions
from gputop.tui.lab.host_line import lab_status_line
from gputop.tui.lab.lab_grid import LabGrid
from gputop.tui.lab.lab_jobs import LabJobsPanel
from gputop.tui.lab.lab_processes import HostRows, LabProcessTable
from gputop.tui.lab.remote_screens import (
    RemoteCardHistoryScreen,
    RemoteLaunchScreen,
    RemoteLogScreen,
    stop_remote_job,
)
from gputop.tui.safe import plain, plain_argv
from gputop.tui.screens.card_history import CardHistoryScreen
from gputop.tui.screens.confirm import ConfirmScreen
from gputop.tui.screens.launch import LaunchContext
from gputop.tui.textual_compat import unless_closing
from gputop.tui.widgets.key_bar import KeyBar
from gputop.tui.widgets.torch_panel import TorchPanel

if TYPE_CHECKING:
    from typing_extensions import Unpack

COMPACT_BELOW_WIDTH = 100
COMPACT_BELOW_HEIGHT = 40
NO_CARD = "No card highlighted: move to a card of a host (g / G, arrows)."


class HostSource(Protocol):
    def statuses(self) -> list[HostStatus]: ...

    def card_history(self, position: int, ask: HistoryAsk) -> CardHistory:
        """A host's card history, asked of its agent; waits (call it from a worker)."""
        ...


@mutable
class LabSampled(Message):
    statuses: list[HostStatus]

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LabSampled)


class LabApp(DashboardApp):
    """Many hosts' dashboard, fed by the lab's links (the keys: ``DashboardApp``'s, and these)."""

    GRID = "#lab"
    BINDINGS = [
        Binding("g", "jump_host(1)", "Next host"),
        Binding("G", "jump_host(-1)", "Prev host", show=False),
        Binding("c", "collapse_host", "Collapse"),
        Binding("C", "collapse_all", "Collapse all", show=False),
        Binding("h", "filter_host", "Host filter", show=False),
        Binding("e", "card_health", "Card health", show=False),
    ]

    def __init__(
        self,
        source: HostSource,
        host_names: Sequence[str],
        *,
        ssh_environ: Mapping[str, str] | None = None,
        **options: Unpack[DashboardOptions],
    ) -> None:
        super().__init__(**options)
        self.source = source
        self.host_names = list(host_names)
        self.ssh_environ = dict(ssh_environ) if ssh_environ is not None else None
        self.statuses: list[HostStatus] = []
        self.policy = FreePolicy()
        self.remote_jobs: list[HostJob] = []
        self._decoded_jobs: dict[int, tuple[object, object, list[HostJob]]] = {}
        """Each host's jobs as last decoded, with the records they came from: a host sends
        its jobs only when they change, so a redraw decodes only a new list."""
        self._said: dict[int, str] = {}
        """The last problem said about each host (said once per change, not every tick)."""
        self.history_timeout_s = HISTORY_TIMEOUT_S
        """How long ``H`` waits for a host's answer (docs/lab.md)."""

    # -- layout --------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        status = Static(Text("gputop  connecting to the hosts…"), id="status")
        status.auto_links = False
        yield status
        yield LabGrid(len(self.host_names), id="lab")
        with Horizontal(id="lower"):
            with Vertical(id="left"):
                yield LabProcessTable(user=self.user, host_names=self.host_names, id="processes")
                yield LabJobsPanel(id="jobs")
            yield TorchPanel(environ=None, python=None, probes=False, id="torch")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(LabGrid).focus()
        self._apply_size()
        self._sample_forever()
        self.settle_collector_later()

    def _apply_size(self, size: Size | None = None) -> None:
        """The layout for ``size`` (a resize's new size: ``self.size`` is still the old one
        while the resize is handled), else the app's size."""
        width, height = size or self.size
        compact = width < COMPACT_BELOW_WIDTH or height < COMPACT_BELOW_HEIGHT
        lower = 8 if compact else MIN_TABLE_ROWS
        self.compact = compact
        try:
            self.query_one(LabGrid).set_geometry(compact, max(3, height - 2 - lower))
        except NoMatches:
            return

    # -- sampling ------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="sampler", exit_on_error=False)
    def _sample_forever(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.post_message(LabSampled(self.source.statuses()))
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    @unless_closing
    def on_lab_sampled(self, message: LabSampled) -> None:
        self._show_lab(message.statuses)

    def _show_lab(self, statuses: list[HostStatus]) -> None:
        self.statuses = statuses
        summaries = [summarize(s, self.policy, self.user) for s in statuses]
        now = max((s.snapshot.timestamp for s in statuses if s.snapshot), default=time.time())
        status_line = self.query_one("#status", Static)
        status_line.update(lab_status_line(statuses, self.interval_s, now), layout=False)
        grid = self.query_one(LabGrid)
        grid.show(statuses, summaries)
        rows = []
        jobs: list[HostJob] = []
        cut: dict[str, tuple[int, int]] = {}
        for position, status in enumerate(statuses):
            of_host = self._host_jobs(position, status)
            jobs.extend(of_host)
            if left_out(status.jobs):  # a host sent more than the lab shows: the newest
                cut[status.host] = (len(of_host), len(status.jobs or ()))
            job_of_pid = {j.pid: j.id for j in of_host if j.pid is not None}
            rows.append(HostRows(status.host, status.snapshot, self._user_of(status), job_of_pid))
            self._say_problems(position, status)
        self.remote_jobs = jobs
        self.query_one(LabProcessTable).show_hosts(rows)
        self.query_one(LabJobsPanel).show(jobs, now, statuses, cut)
        self._show_torch()

    def _host_jobs(self, position: int, status: HostStatus) -> list[HostJob]:
        known = self._decoded_jobs.get(position)
        if known is not None and known[0] is status.jobs and known[1] == (status.host, status.mode):
            return known[2]
        decoded = host_jobs(position, status.host, status.jobs, status.mode is Mode.LOCAL)
        self._decoded_jobs[position] = (status.jobs, (status.host, status.mode), decoded)
        return decoded

    def _user_of(self, status: HostStatus) -> str:
        return self.user if status.mode is Mode.LOCAL else (status.user or "")

    def _say_problems(self, position: int, status: HostStatus) -> None:
        """A host that fails, or runs reduced, is said once, with the full reason."""
        problem = ""
        if status.state is LinkState.UNREACHABLE and status.failure is not None:
            problem = status.failure.kind
        elif status.mode is Mode.REDUCED:
            problem = "reduced"
        elif older_note(status.host, status.agent_version) is not None:
            problem = "older"
        if problem and self._said.get(position) != problem:
            text = status.describe()
            self.notify(f"{clean(status.host)}: {text}", severity="warning", timeout=10)
        self._said[position] = problem

    def _show_torch(self) -> None:
        grid = self.query_one(LabGrid)
        if grid.host < len(self.statuses):
            snapshot = self.statuses[grid.host].snapshot
            if snapshot is not None:
                self.query_one(TorchPanel).show(snapshot)

    def on_lab_grid_selection_changed(self, message: LabGrid.SelectionChanged) -> None:
        table = self.query_one(LabProcessTable)
        if table.only_gpu is not None and message.highlighted is not None:
            table.filter_card(message.host, message.highlighted, follow=True)
        self.query_one(TorchPanel).set_selection(tuple(message.cards))
        self._show_torch()

    def on_lab_grid_selection_moved(self, message: LabGrid.SelectionMoved) -> None:
        old, new = self.host_names[message.old_host], self.host_names[message.new_host]
        self.notify(
            f"A selection belongs to one host: the cards selected on {clean(old)} were "
            f"dropped; selecting on {clean(new)} now."
        )

    # -- actions -------------------------------------------------------------------------

    def action_jump_host(self, step: int) -> None:
        self.query_one(LabGrid).jump_host(step)

    def action_collapse_host(self) -> None:
        self.query_one(LabGrid).toggle_collapsed()

    def action_collapse_all(self) -> None:
        expanded = self.query_one(LabGrid).toggle_all()
        self.notify("Every host expanded." if expanded else "Every host collapsed.", timeout=2)

    def action_filter_host(self) -> None:
        host = self.query_one(LabGrid).host
        self.change_view(lambda table: table.filter_host(host))

    def action_filter_card(self) -> None:
        grid = self.query_one(LabGrid)
        self.change_view(lambda table: table.filter_card(grid.host, grid.highlighted))

    def _status(self, position: int | None) -> HostStatus | None:
        """The host at ``position`` as last read (None: none there, or not read yet)."""
        known = position is not None and position < len(self.statuses)
        return self.statuses[position] if known and position is not None else None

    def action_card_history(self) -> None:
        grid = self.query_one(LabGrid)
        position, card = grid.host, grid.highlighted
        status = self._status(position)
        if status is None or card is None:
            self.notify(NO_CARD)
            return
        uuid = gpu.uuid if (gpu := self._lab_card(position, card)) is not None else None
        if status.mode is Mode.LOCAL:
            self.push_screen(CardHistoryScreen(card, self.history_store, uuid=uuid))
            return
        source, timeout_s = self.source, self.history_timeout_s

        def read(physical_index: int, window_s: float, now: float, columns: int) -> CardHistory:
            ask = HistoryAsk(physical_index, window_s, now, columns, timeout_s, uuid)
            return source.card_history(position, ask)

        self.push_screen(RemoteCardHistoryScreen(status.host, card, read))

    def action_card_health(self) -> None:
        grid = self.query_one(LabGrid)
        position, index = grid.host, grid.highlighted
        host = status.host if (status := self._status(position)) is not None else None
        self.show_card_health(lambda: self._lab_card(position, index), NO_CARD, host, index)

    def _lab_card(self, position: int, index: int | None) -> GpuSample | None:
        status = self._status(position)
        gpus = status.snapshot.gpus if status is not None and status.snapshot else ()
        return next((g for g in gpus if g.physical_index == index), None)

    def action_process_history(self) -> None:
        status = self._status(self.query_one(LabProcessTable).current_host)
        if status is not None and status.mode is not Mode.LOCAL:
            self.notify(
                "A remote process's own history is not shown yet: H on its card shows "
                "who held the card, from that host's recorder."
            )
            return
        super().action_process_history()

    def action_launch(self) -> None:
        grid = self.query_one(LabGrid)
        position = grid.selection_host
        status = self._status(position)
        if status is None or status.snapshot is None:
            self.notify("No reading from this host yet: nothing to launch on.")
            return
        if status.mode is Mode.REDUCED:
            self.notify(
                f"{clean(status.host)} runs in reduced mode: there is no gputop there to "
                f"launch with ({clean(install_advice(status.host))}).",
                severity="warning",
            )
            return
        cards = grid.selection
        if not cards:
            self.notify("No card to launch on.", severity="warning")
            return
        active = tuple(j for j in self.remote_jobs if j.host == position and j.active)
        context = LaunchContext(
            snapshot=status.snapshot,
            physical_indices=cards,
            user=self._user_of(status),
            active_jobs=cast(tuple, active),
            cwd=self.jobs_service.cwd if status.mode is Mode.LOCAL else "",
            environ=self.jobs_service.job_environ() if status.mode is Mode.LOCAL else {},
            jobs=self.jobs_service,  # this machine's: history for the dialog, local launches
        )
        if status.mode is Mode.LOCAL:
            from gputop.tui.screens.launch import LaunchScreen

            self.push_screen(LaunchScreen(context))
            return
        self.push_screen(RemoteLaunchScreen(context, status.host, self.ssh_environ))

    def on_jobs_table_log_requested(self, message: LabJobsPanel.LogRequested) -> None:
        self.push_screen(RemoteLogScreen(message.job, self.ssh_environ))

    def on_jobs_table_stop_requested(self, message: LabJobsPanel.StopRequested) -> None:
        job = message.job
        if not job.active:
            said = f"Job {job.id} on {clean(job.host_name)} has already ended ({job.status_text})."
            self.notify(said)
            return
        question = Text.assemble(
            f"Stop job {job.id} (",
            plain(job.name),
            ") on ",
            plain(job.host_name, style="bold"),
            "?\n\n  ",
            plain(job.command_text),
            "\n\nSIGTERM to its whole process group, then SIGKILL if it has not ended "
            "after the grace period (done by gputop on that host).",
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._stop_remote(job)

        self.push_screen(ConfirmScreen(question, yes_label="Stop job"), answered)

    @work(thread=True, group="jobs-stop", exit_on_error=False)
    def _stop_remote(self, job: HostJob) -> None:
        self.notify(stop_remote_job(job, self.ssh_environ))

    def signal_process(self, process: GpuProcess, signal_name: str) -> None:
        position = self.query_one(LabProcessTable).current_host
        if position is None:  # a row of no known host: never taken for this machine's
            self.notify("No process highlighted: press tab to reach the process table.")
            return
        status = self.statuses[position]
        if status.mode is Mode.LOCAL:
            super().signal_process(process, signal_name)
            return
        host = clean(status.host)
        owner = self._user_of(status)
        if status.mode is Mode.REDUCED or not owner or process.user != owner:
            self.notify(
                f"Process {process.pid} on {host} belongs to "
                f"{clean(process.user or 'an unknown user')}; gputop only signals your own "
                f"processes ({clean(owner or '?')} there).",
                severity="warning",
            )
            return
        question = Text.assemble(
            f"Send {signal_name} to process {process.pid} on ",
            (host, "bold"),
            f", GPU {process.physical_index}?\n\n  ",
            plain_argv(process.command) if process.command else "?",
            "\n\ngputop on that host checks again that the process is yours and the same one.",
        )

        boot_id = status.snapshot.boot_id if status.snapshot is not None else None

        def answered(yes: bool | None) -> None:
            if yes:
                self._signal_remote(
                    status.host,
                    process.pid,
                    signal_name,
                    (process.start_time, process.start_ticks, boot_id),
                )

        self.push_screen(ConfirmScreen(question, yes_label=f"Send {signal_name}"), answered)

    @work(thread=True, group="signal", exit_on_error=False)
    def _signal_remote(
        self,
        host: str,
        pid: int,
        signal_name: str,
        started: tuple[float | None, int | None, str | None],
    ) -> None:
        """``started``: the process's start time, start ticks and its host's boot id, as the
        host's snapshot gave them (the ticks from hosts whose gputop has --start-ticks)."""
        start_time, start_ticks, boot_id = started
        argv = signal_argv(
            host, pid, start_time, signal_name, self.ssh_environ, start_ticks, boot_id
        )
        result = run_remote(argv, self.ssh_environ)
        if start_ticks is not None and not result.ok and "--start-ticks" in result.message:
            # a gputop there without the option (its signal older than its agent): as before
            argv = signal_argv(host, pid, start_time, signal_name, self.ssh_environ)
            result = run_remote(argv, self.ssh_environ)
        where = clean(host)
        if result.ok:
            self.notify(f"{where}: {result.message or f'sent {signal_name} to {pid}'}")
        else:
            self.notify(f"{where}: {result.message}", severity="error")
