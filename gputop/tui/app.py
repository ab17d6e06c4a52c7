"""The dashboard application: sampling in a worker thread, rendering on the UI thread.

The worker runs the sampling loop (sampling_loop.py): a snapshot per interval, and the jobs
gputop launched with it, which the app posts. A sample not yet rendered is replaced by a
newer one (``can_replace``): a slow terminal never queues stale frames. Widgets only render
what they are given: no NVML, psutil or job-store call happens on the UI thread.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.message import Message

from gputop.core.history.recent import REFILL_EVERY_S
from gputop.core.jobs.service import JobsView
from gputop.core.jobs.store import JobStore
from gputop.core.model import GpuSample, Snapshot
from gputop.core.records import mutable
from gputop.core.safe_text import clean
from gputop.core.sampling.early import EarlySample
from gputop.core.sampling.history import UtilizationHistory, initial_history
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.slurm.watch import SlurmView, SlurmWatch
from gputop.tui.dashboard_base import MIN_TABLE_ROWS, DashboardOptions, JobStoreProblem
from gputop.tui.health_toasts import XidToasts
from gputop.tui.jobs_actions import JobsActions, JobsRead
from gputop.tui.sampling_loop import (
    Delivered,
    JobsFailed,
    SampleFailed,
    SamplingLoop,
    StoreJobs,
)
from gputop.tui.textual_compat import unless_closing
from gputop.tui.widgets.card_frame import CARD_HEIGHT
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.grid_layout import columns_for
from gputop.tui.widgets.key_bar import KeyBar
from gputop.tui.widgets.process_table import ProcessTable
from gputop.tui.widgets.status_bar import HostBar, StatusBar
from gputop.tui.widgets.torch_panel import TorchPanel

if TYPE_CHECKING:
    from typing_extensions import Unpack

FIXED_LINES = 3
"""The status line, the host line and the key bar."""


@mutable
class SlurmRead(Message):
    """What Slurm says of this node's cards, the user's jobs and the GPU processes."""

    view: SlurmView


@mutable
class SnapshotSampled(Message):
    """A new snapshot and the jobs with it; it supersedes one still waiting in the queue."""

    snapshot: Snapshot
    jobs: JobsView | None

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotSampled)


@mutable
class HistoryRefilled(Message):
    """The sparklines' past, read again from the recorder's store (core/history/recent.py)."""

    stored: dict[str, tuple[int | None, ...]]


@mutable
class SamplingFailed(Message):
    error: str


class GputopApp(JobsActions):
    """One host's dashboard, sampled through NVML (the keys: ``DashboardApp``'s, and ``e``)."""

    BINDINGS = [Binding("e", "card_health", "Card health", show=False)]

    def __init__(
        self,
        backend: NvmlBackend,
        *,
        python: str | None = None,
        environ: Mapping[str, str] | None = None,
        history: UtilizationHistory | None = None,
        probes: bool = True,
        first_sample: EarlySample | None = None,
        **options: Unpack[DashboardOptions],
    ) -> None:
        super().__init__(**options)
        self.backend = backend
        self._first_sample = first_sample
        """The first sample, read while the interface started (gputop.core.sampling.early)."""
        self.python = python
        self.environ = dict(environ) if environ is not None else None
        self.history = history or initial_history(backend.nvml)
        self._xid_toasts = XidToasts()
        """One toast for the Xids that arrived since the last sample (docs/health.md)."""
        self.probes = probes
        self.snapshot: Snapshot | None = None
        self.slurm_watch = SlurmWatch.for_environment(
            os.environ if self.environ is None else self.environ, self.user
        )
        """Where Slurm's commands are here: who holds each card (docs/slurm.md)."""
        self._slurm_error: str | None = None
        self.slurm_job_users: Mapping[int, int] = {}
        """Slurm job id → its uid, as Slurm last said: what proves a process's job (cgroup.py)."""
        self.sampling_error: str | None = None
        """The error of the last sample while sampling fails; None while it works."""
        self.refill_every_s = REFILL_EVERY_S
        """How often the sparklines' past is read again while a recorder's store lacks some."""

    # -- layout --------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield HostBar(id="host")
        yield GpuGrid(id="cards")
        with Horizontal(id="lower"):
            with Vertical(id="left"):
                yield ProcessTable(user=self.user, id="processes")
                yield Vertical(id="jobs-box")  # the jobs panel's place: jobs_table()
            yield TorchPanel(
                environ=self.environ, python=self.python, probes=self.probes, id="torch"
            )
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(GpuGrid).focus()
        # The processes out of sight need not have their /proc read every second (the
        # sampler proves them the same processes: gputop.core.sampling.host_processes).
        self.query_one(ProcessTable).on_shown = getattr(self.backend, "show_only", None)
        loop = SamplingLoop(
            self.backend,
            interval_s=self.interval_s,
            jobs=StoreJobs(self.jobs_service, self._read_slurm),
            stop=self._stop,
            deliver=self._post_sampled,
            first_sample=self._first_sample,
        )
        self._first_sample = None
        # The first sample, if it was read while Textual started, is in the first frame; its
        # jobs follow from the sampling thread, which reads them for this same snapshot.
        first = loop.show_first()
        if first is not None:
            self._show_sample(SnapshotSampled(first, None))
        else:
            self.query_one(StatusBar).show_waiting()
        self._sample_forever(loop)
        self.settle_collector_later()

    def _apply_size(self, size: Size | None = None) -> None:
        count = len(self.snapshot.gpus) if self.snapshot else 0
        width, height = size or self.size
        card_rows = math.ceil(max(count, 1) / columns_for(count, width)) * CARD_HEIGHT
        compact = width < 100 or height - card_rows - FIXED_LINES < MIN_TABLE_ROWS
        if compact != self.compact:
            self.compact = compact
            if self.snapshot is not None:
                self._render_snapshot(self.snapshot)

    # -- sampling ------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="sampler", exit_on_error=False)
    def _sample_forever(self, loop: SamplingLoop) -> None:
        loop.run()

    def _post_sampled(self, result: Delivered) -> None:
        """In the sampling thread: what the loop read, as the message the UI thread shows."""
        if isinstance(result, SampleFailed):
            self.post_message(SamplingFailed(result.error))
        elif isinstance(result, JobsFailed):
            text = f"Jobs unavailable: {result.error}"
            self.post_message(JobStoreProblem(text, severity="error"))
        elif not result.shown:
            self.post_message(SnapshotSampled(result.snapshot, result.jobs))
        elif result.jobs is not None:  # the first frame showed the sample: its jobs
            self.post_message(JobsRead(result.jobs))

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

    @unless_closing
    def on_slurm_read(self, message: SlurmRead) -> None:
        view = message.view
        if view.error and view.error != self._slurm_error:
            self.notify(f"Slurm: {clean(view.error)}", severity="warning", timeout=10)
        self._slurm_error = view.error
        self.slurm_job_users = view.job_users
        self.query_one(GpuGrid).show_slurm(
            {i: label for i in view.holders if (label := view.card_label(i)) is not None}
        )
        self.query_one(ProcessTable).set_slurm_jobs(view.process_jobs)
        if view.user_jobs or self.jobs_table_mounted():
            self.jobs_table().show_slurm(view.user_jobs)

    @unless_closing
    def on_snapshot_sampled(self, message: SnapshotSampled) -> None:
        self._show_sample(message)

    def _show_sample(self, message: SnapshotSampled) -> None:
        first = self.snapshot is None
        if self.sampling_error is not None:
            self.sampling_error = None
            self.notify("Sampling works again.", timeout=5)
        self.snapshot = message.snapshot
        self.history.add(message.snapshot)
        toast = self._xid_toasts.new(message.snapshot)
        if toast is not None:
            self.notify(toast.text, severity="error" if toast.critical else "warning", timeout=10)
        if message.jobs is not None:
            self._show_jobs(message.jobs)
        if first:
            self._apply_size()
            if self.history.live_from is not None:
                self._refill_history(self.history.live_from)
        self._render_snapshot(message.snapshot)

    @work(thread=True, exclusive=True, group="history-refill", exit_on_error=False)
    def _refill_history(self, live_from: float) -> None:
        """The sparklines' past read again while the recorder's store lacks some of it: it
        writes in batches, so the seconds before this dashboard started come later."""
        from gputop.core.history.recent import refill_read

        seconds = math.ceil(self.history.length * self.history.bucket_s)
        deadline = time.monotonic() + seconds  # by then that past has scrolled off the cards
        while not self._stop.wait(self.refill_every_s):
            read = refill_read(self.history_store, live_from, seconds)
            if read is None:
                return  # no store: no recorder writes one
            if read.stored is not None:
                self.post_message(HistoryRefilled(read.stored))
            if read.complete or time.monotonic() > deadline:
                return

    @unless_closing
    def on_history_refilled(self, message: HistoryRefilled) -> None:
        self.history.refill(message.stored)
        if self.snapshot is not None:
            self.query_one(GpuGrid).show(self.snapshot, self.history, self.compact)

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
            from gputop.core.process_jobs import ProcessJobs
            from gputop.tui.screens.process_detail import ProcessDetailScreen

            table = self.query_one(ProcessTable)
            pid = message.process.pid
            jobs = ProcessJobs(table.job_of_pid.get(pid), table.slurm_of_pid.get(pid))
            names = {job.id: (job.name, job.status_text) for job in self.jobs_service.view.jobs}
            self.push_screen(
                ProcessDetailScreen(
                    self.snapshot,
                    message.process,
                    self.history_store,
                    self._now,
                    jobs=jobs,
                    job_names=names,
                    slurm_job_users=self.slurm_job_users,
                )
            )

    def on_gpu_grid_selection_changed(self, message: GpuGrid.SelectionChanged) -> None:
        table = self.query_one(ProcessTable)
        if table.only_gpu is not None and message.highlighted is not None:
            table.toggle_filter(message.highlighted, follow=True)
        self.query_one(TorchPanel).set_selection(message.cards)

    # -- actions -------------------------------------------------------------------------

    def action_card_history(self) -> None:
        highlighted = self.query_one(GpuGrid).highlighted
        if highlighted is None:
            self.notify("No card highlighted.")
            return
        from gputop.tui.screens.card_history import CardHistoryScreen

        card = self._card(highlighted)
        self.push_screen(
            CardHistoryScreen(
                highlighted,
                self.history_store,
                self._now,
                health=None if card is None else card.health,
                show_health=True,
                uuid=None if card is None else card.uuid,
            )
        )

    def action_card_health(self) -> None:
        index = self.query_one(GpuGrid).highlighted
        self.show_card_health(lambda: self._card(index), "No card highlighted.", None, index)

    def _card(self, index: int | None) -> GpuSample | None:
        gpus = self.snapshot.gpus if self.snapshot is not None else ()
        return next((g for g in gpus if g.physical_index == index), None)

    def _now(self) -> float:
        """The time history windows end at: the simulated clock's on simulated GPUs."""
        clock = getattr(self.backend.nvml, "epoch_time", None)
        return float(clock()) if callable(clock) else time.time()

    def action_filter_card(self) -> None:
        highlighted = self.query_one(GpuGrid).highlighted
        self.change_view(lambda table: table.toggle_filter(highlighted))
