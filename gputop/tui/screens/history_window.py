"""What the history screens share (``H`` on a card, ``H`` on a process): a window of the last
hour, day or week (keys 1, 2, 3), read in a worker thread (from the recorder's store, or in
the lab from a host's agent) and shown as plain text (docs/history.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rich.console import RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.core.history.card_history import WINDOWS_S
from gputop.core.history.plot import labelled_plot, time_axis
from gputop.core.units import human_bytes
from gputop.tui.workers import ReportsWorkerFailures

PLOT_LABEL_WIDTH = 6
"""The scale left of a plot: ``100%``, ``40.0G``."""
PLOT_HEIGHT = 4
"""Rows a plot: 32 levels, and a card's plots and holders still fit 80x24."""
MIN_COLUMNS = 10
FRAME_WIDTH = 7
"""The panel's border and padding, the axis, its scroll bar (a card's history is taller than
80x24: without it each plot row wrapped one cell) and a spare cell."""
WINDOW_NAMES = {"1": "last hour", "2": "last 24 hours", "3": "last 7 days"}


class HistoryWindowScreen(ReportsWorkerFailures, ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,H", "dismiss", "Close"),
        Binding("1", "window('1')", "1 hour"),
        Binding("2", "window('2')", "24 hours"),
        Binding("3", "window('3')", "7 days"),
    ]

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self._clock = clock
        self.window = "1"
        self.shown: object | None = None
        """What the last read found (a test waits for it)."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="history"):
            yield Static(self._title(), id="history-title")
            yield Static(Text("Reading the history…", style="dim"), id="history-body")

    def on_mount(self) -> None:
        self.action_window(self.window)

    def action_window(self, key: str) -> None:
        self.window = key
        self.query_one("#history-title", Static).update(self._title())
        self._read(key, max(MIN_COLUMNS, self.app.size.width - PLOT_LABEL_WIDTH - FRAME_WIDTH))

    def _title(self) -> Text:
        return Text.assemble(
            self.subject(),
            (f": {WINDOW_NAMES[self.window]}", "bold"),
            ("   1 hour · 2 day · 3 week · escape closes", "dim"),
        )

    @work(thread=True, group="history-window", exclusive=True, exit_on_error=False)
    def _read(self, key: str, columns: int) -> None:
        found = self.read_history(WINDOWS_S[key], self._clock(), columns)
        self.app.call_from_thread(self._show, found)

    def _show(self, found: object) -> None:
        self.shown = found
        self.query_one("#history-body", Static).update(self.render_history(found))

    def subject(self) -> Text:
        raise NotImplementedError

    def read_history(self, window_s: float, now: float, columns: int) -> object:
        """Runs in a worker thread."""
        raise NotImplementedError

    def render_history(self, found: object) -> RenderableType:
        raise NotImplementedError


def memory_plot(values: Sequence[float | None], top: float | None) -> list[Text]:
    """Memory in bytes as a plot, its scale in ``40.0G``."""
    return plot_lines(values, top, lambda value: human_bytes(int(value)))


def time_line(since: float, until: float, columns: int) -> Text:
    """The time axis under plots of ``columns`` slices from ``since`` to ``until``."""
    return Text(time_axis(since, until, columns, PLOT_LABEL_WIDTH), "dim")


def plot_lines(
    values: Sequence[float | None], top: float | None, label: Callable[[float], str]
) -> list[Text]:
    """A series as a plot ``PLOT_HEIGHT`` rows high with its scale (core/history/plot.py)."""
    rows = labelled_plot(values, top, PLOT_HEIGHT, label, PLOT_LABEL_WIDTH)
    return [
        Text.assemble((row[: PLOT_LABEL_WIDTH + 1], "dim"), row[PLOT_LABEL_WIDTH + 1 :])
        for row in rows
    ]
