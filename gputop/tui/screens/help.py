"""Every key of the dashboard (``gputop.tui.keys``, which a test ties to the bindings)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

CLOSE_HINT = "escape, q or ? closes this"
"""The help window's bottom border: the keys its binding below closes it with."""


class HelpScreen(ModalScreen[None]):
    # The window's look where an app has no rules of its own for it (the fleet dashboard's;
    # gputop.tcss gives the dashboards the same).
    DEFAULT_CSS = """
    HelpScreen { align: center middle; background: $background 60%; }
    HelpScreen #help {
        width: 84; max-width: 100%; height: 80%;
        border: round $accent; background: $surface; padding: 1 2;
    }
    """
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
        with VerticalScroll(id="help") as window:
            # On the border: seen without scrolling, even where the keys need it (80x24).
            window.border_subtitle = CLOSE_HINT
            yield Static(table)
            yield Static(Text("Every action is also in the command palette (ctrl+p).", style="dim"))
