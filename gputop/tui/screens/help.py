"""Every key of the dashboard (``gputop.tui.keys``, which a test ties to the bindings)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self._sections = sections

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for title, rows in self._sections:
            table.add_row(Text(title, style="bold"), "")
            for keys, description in rows:
                table.add_row(Text(keys), Text(description))
            table.add_row("", "")
        with VerticalScroll(id="help"):
            yield Static(table)
            yield Static(Text("Every action is also in the command palette (ctrl+p).", style="dim"))
