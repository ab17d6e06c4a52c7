"""One GPU process in detail: its card, its own CUDA view and rank, its job's other ranks."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.core.model import GpuProcess, Snapshot
from gputop.core.process_detail import describe_process

_STYLES = {"heading": "bold", "warning": "bold yellow", "dim": "dim", "": ""}


class ProcessDetailScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,enter,q", "close", "Close")]

    def __init__(self, snapshot: Snapshot, process: GpuProcess) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.process = process

    def compose(self) -> ComposeResult:
        text = Text()
        for number, line in enumerate(describe_process(self.snapshot, self.process)):
            if number:
                text.append("\n")
            text.append(line.text, style=_STYLES.get(line.style, ""))  # cleaned, never markup
        with VerticalScroll(id="dialog"):
            yield Static(text, id="process-detail")
            yield Static(Text("enter/escape: close", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
