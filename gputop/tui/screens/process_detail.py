"""One GPU process in detail: its card, its own CUDA view and rank, its job's other ranks, and
what the recorder stored of it over the last hour (docs/history.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
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
from gputop.core.model import GpuProcess, Snapshot
from gputop.core.process_detail import describe_process
from gputop.tui.screens.process_history import render_process_history
from gputop.tui.workers import ReportsWorkerFailures

_STYLES = {"heading": "bold", "warning": "bold yellow", "dim": "dim", "": ""}
HISTORY_COLUMNS = 60


class ProcessDetailScreen(ReportsWorkerFailures, ModalScreen[None]):
    BINDINGS = [Binding("escape,enter,q", "close", "Close")]

    def __init__(
        self,
        snapshot: Snapshot,
        process: GpuProcess,
        history_store: Path | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.process = process
        self.history_store = history_store
        self._clock = clock
        self.history: ProcessHistory | None = None
        """What the recorder's store holds of this process (a test waits for it)."""

    def compose(self) -> ComposeResult:
        text = Text()
        for number, line in enumerate(describe_process(self.snapshot, self.process)):
            if number:
                text.append("\n")
            text.append(line.text, style=_STYLES.get(line.style, ""))  # cleaned, never markup
        with VerticalScroll(id="dialog"):
            yield Static(text, id="process-detail")
            if self.history_store is not None:
                yield Static(Text("Its last hour", style="bold"))
                yield Static(Text("Reading the history…", style="dim"), id="detail-history")
            yield Static(Text("enter/escape: close · H on the process: day and week", style="dim"))

    def on_mount(self) -> None:
        if self.history_store is not None:
            self._read_history(self.history_store)

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

    def action_close(self) -> None:
        self.dismiss(None)
