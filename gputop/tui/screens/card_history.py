"""``H`` on a card: its utilisation and memory over the last hour, day or week, and who held
it, idle holders first (docs/history.md), then its health (docs/health.md). Names from the
store are plain text, never markup."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text

from gputop.core.history.card_history import CardHistory, read_card_history
from gputop.core.history.report import DEFAULT_IDLE_MIN_S
from gputop.core.history.series import GpuSeries
from gputop.core.history.spans import IDLE_SM_PERCENT
from gputop.core.model import GpuHealth
from gputop.core.units import NA, duration, human_bytes
from gputop.tui.safe import plain
from gputop.tui.screens.health import render_health_screen
from gputop.tui.screens.history_window import (
    HistoryWindowScreen,
    memory_plot,
    plot_lines,
    time_line,
)


class CardHistoryScreen(HistoryWindowScreen):
    def __init__(
        self,
        physical_index: int,
        store: Path,
        clock: Callable[[], float] = time.time,
        *,
        health: GpuHealth | None = None,
        show_health: bool = False,
        uuid: str | None = None,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.physical_index = physical_index
        self.uuid = uuid
        """The card's UUID: its history is found by it (None: by its index alone)."""
        self.health = health
        """The card's health at the sample the screen was opened on (screens/health.py)."""
        self.show_health = show_health

    def subject(self) -> Text:
        return Text(f"GPU {self.physical_index}", style="bold")

    def read_history(self, window_s: float, now: float, columns: int) -> CardHistory:
        return read_card_history(self.store, self.physical_index, window_s, now, columns, self.uuid)

    def render_history(self, found: object) -> RenderableType:
        assert isinstance(found, CardHistory)
        shown = render_card_history(found)
        if not self.show_health:
            return shown
        heading = Text("\nHealth", style="bold")
        return Group(shown, heading, render_health_screen(self.health))


def render_card_history(history: CardHistory) -> Text:
    if history.problem is not None:
        return Text(history.problem, style="yellow")
    if history.series is None and not history.holders:
        return Text("Nothing was recorded for this card in this window.", style="dim")
    lines: list[Text] = []
    series = history.series
    if series is not None:
        util = series.utilization_percent
        lines += _percent_plot("utilisation", util)
        known = [value for value in series.memory_used_bytes if value is not None]
        top = series.memory_total_bytes or (max(known) if known else None)
        total = f" of {human_bytes(series.memory_total_bytes)}" if series.memory_total_bytes else ""
        figures = f"peak {human_bytes(int(max(known)))}{total}" if known else "nothing recorded"
        lines.append(Text.assemble(("memory  ", "bold"), figures))
        lines += memory_plot(series.memory_used_bytes, top)
        axis = time_line(history.since, history.until, len(util))
        lines.append(axis)
        activity = _activity_lines(series)
        lines += activity
        if len(activity) > 1:  # plots: their own time axis under them
            lines.append(axis.copy())
        lines.append(Text(""))
    rule = f"SM under {IDLE_SM_PERCENT:g} % for {DEFAULT_IDLE_MIN_S / 60:g} minutes or more"
    lines.append(Text(f"Held by (idle: {rule})", style="bold"))
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


ACTIVITY_PLOTS = (
    ("SM active", "sm_active_percent"),
    ("tensor active", "tensor_active_percent"),
    ("DRAM", "dram_active_percent"),
)
"""GPM's figures the history plots (docs/activity.md)."""


def _activity_lines(series: GpuSeries) -> list[Text]:
    """A plot each of SM active, tensor active and DRAM where GPM answered; once, that it is
    not available, where it never did in the window; nothing from a host too old to say."""
    if not any(getattr(series, key) for _, key in ACTIVITY_PLOTS):
        return []
    if not any(v is not None for _, key in ACTIVITY_PLOTS for v in getattr(series, key)):
        return [Text("activity (SM, tensor, DRAM): not available on this GPU", style="dim")]
    return [
        line for title, key in ACTIVITY_PLOTS for line in _percent_plot(title, getattr(series, key))
    ]


def _percent_plot(title: str, values: Sequence[float | None]) -> list[Text]:
    """A percentage's mean and peak over the window, and its plot."""
    known = [value for value in values if value is not None]
    figures = (
        f"mean {sum(known) / len(known):.0f} %  peak {max(known):.0f} %"
        if known
        else "nothing recorded"
    )
    return [
        Text.assemble((f"{title}  ", "bold"), figures),
        *plot_lines(values, 100.0, lambda value: f"{value:.0f}%"),
    ]
