"""A yes/no question that names exactly what will happen."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "dismiss(True)", "Yes"),
        Binding("n,escape", "dismiss(False)", "No"),
    ]

    def __init__(self, question: Text, yes_label: str = "Yes") -> None:
        """``question`` is Rich ``Text`` (never markup): it quotes commands and names."""
        super().__init__()
        self._question = question
        self._yes_label = yes_label

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self._question, id="question")
            with Horizontal(id="buttons"):
                yield Button(Content(f"{self._yes_label} (y)"), variant="error", id="yes")
                yield Button("Cancel (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
