"""``H``: the highlighted card's history from the recorder's store (docs/history.md).

Its utilisation and memory over the last hour, day or week (keys 1, 2, 3) as rows of block
characters, and who held it, idle holders first. Read in a worker thread; every name from
the store is shown as plain text (``tui.safe.plain``), never as markup.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.core.history.card_history import WINDOWS_S, CardHistory, read_card_history
from gputop.core.history.series import bars
from gputop.core.units import NA, duration, human_bytes
from gputop.tui.safe import plain
from gputop.tui.workers import ReportsWorkerFailures

LABEL_WIDTH = 6
MIN_COLUMNS = 10
WINDOW_NAMES = {"1": "last hour", "2": "last 24 hours", "3": "last 7 days"}


class CardHistoryScreen(ReportsWorkerFailures, ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,H", "dismiss", "Close"),
        Binding("1", "window('1')", "1 hour"),
        Binding("2", "window('2')", "24 hours"),
        Binding("3", "window('3')", "7 days"),
    ]

    def __init__(self, physical_index: int, store: Path, clock: object = time.time) -> None:
        super().__init__()
        self.physical_index = physical_index
        self.store = store
        self._clock = clock
        self.window = "1"
        self.shown: CardHistory | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="history-title")
        yield Static(Text("Reading the history…", style="dim"), id="history-body")

    def on_mount(self) -> None:
        self._read(self.window, max(MIN_COLUMNS, self.app.size.width - LABEL_WIDTH - 24))

    def action_window(self, key: str) -> None:
        self.window = key
        self.query_one("#history-title", Static).update(self._title())
        self._read(key, max(MIN_COLUMNS, self.app.size.width - LABEL_WIDTH - 24))

    def _title(self) -> Text:
        return Text.assemble(
            (f"GPU {self.physical_index}: {WINDOW_NAMES[self.window]}", "bold"),
            ("   1 hour · 2 day · 3 week · escape closes", "dim"),
        )

    @work(thread=True, group="card-history", exclusive=True, exit_on_error=False)
    def _read(self, key: str, columns: int) -> None:
        now = self._clock() if callable(self._clock) else time.time()
        history = read_card_history(self.store, self.physical_index, WINDOWS_S[key], now, columns)
        self.app.call_from_thread(self._show, history)

    def _show(self, history: CardHistory) -> None:
        self.shown = history
        self.query_one("#history-body", Static).update(render_card_history(history))


def render_card_history(history: CardHistory) -> Text:
    if history.problem is not None:
        return Text(history.problem, style="yellow")
    if history.series is None and not history.holders:
        return Text("Nothing was recorded for this card in this window.", style="dim")
    lines: list[Text] = []
    series = history.series
    if series is not None:
        lines.append(Text.assemble(("util  ", "bold"), bars(series.utilization_percent, 100.0)))
        known = [value for value in series.memory_used_bytes if value is not None]
        top = series.memory_total_bytes or (max(known) if known else None)
        lines.append(Text.assemble(("mem   ", "bold"), bars(series.memory_used_bytes, top)))
        lines.append(Text(""))
    lines.append(Text("Held by (idle: SM under 5 % for 30 minutes or more)", style="bold"))
    for row in history.holders:
        idle = f"idle {duration(row.idle_held_seconds)}" if row.idle else ""
        lines.append(
            Text.assemble(
                ("! " if row.idle else "  ", "bold red"),
                plain(str(row.key)),
                f"  held {duration(row.gpu_seconds)}",
                f"  peak {human_bytes(row.peak_memory_bytes)}",
                "  SM " + (NA if row.mean_sm_util is None else f"{row.mean_sm_util:.0f} %"),
                (f"  {idle}" if idle else "", "red"),
            )
        )
    return Text("\n").join(lines)
