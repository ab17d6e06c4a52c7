"""``/``: the text the process table is filtered by (a user, part of a command, a pid)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from gputop.tui.textual_compat import InOrderInput


class FilterScreen(ModalScreen[str | None]):
    """Asks for the filter; enter applies it (empty: every process again), escape keeps
    the one there was."""

    BINDINGS = [Binding("escape", "dismiss", "Cancel")]

    def __init__(self, current: str) -> None:
        super().__init__()
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="filter"):
            yield Label("Show processes with this text (user, command, pid); empty shows all:")
            yield InOrderInput(value=self._current, id="filter-text", placeholder="e.g. alice")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)
