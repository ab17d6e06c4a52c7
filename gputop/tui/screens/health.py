"""``e`` on a card: its health on a screen of its own (docs/health.md). The verdict with each
reason and what to do, every counter (or that the card does not have it), each Xid with its
time, meaning and action, newest first; read again from the dashboard's samples while open.
The card history (``H``) shows the same under the card's history.

Laid out in grids so that a long meaning wraps inside its own column at 80x24, never under
the times. gputop's own words only: nothing here is the driver's text.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.core.health import verdict
from gputop.core.model import GpuHealth
from gputop.core.xid import describe
from gputop.tui.safe import plain, plain_content

NOT_HERE = "not on this card"
XIDS_UNKNOWN = "unknown: neither NVML's events nor the kernel log is open to you"
STYLES = {"ok": "bold green", "warning": "bold yellow", "critical": "bold red"}
REFRESH_S = 1.0
"""How often the screen looks for a newer sample of the card."""
CLOSE_HINT = "escape or e closes this"


class HealthScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HealthScreen { align: center top; background: $background 60%; }
    HealthScreen #health {
        width: 100%; max-width: 120; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [Binding("escape,q,e", "dismiss", "Close")]

    def __init__(self, title: str, health_of: Callable[[], GpuHealth | None]) -> None:
        """``title``: plain text, never markup (it names the card as its driver does);
        ``health_of``: the card's health in the newest sample (None: not read)."""
        super().__init__()
        self._title = title
        self._health_of = health_of
        self.health: GpuHealth | None = health_of()
        """What is shown (a test reads it)."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="health") as window:
            window.border_title = plain_content(self._title)  # the card's name: not markup
            window.border_subtitle = CLOSE_HINT
            yield Static(render_health_screen(self.health), id="health-body")

    def on_mount(self) -> None:
        self.set_interval(REFRESH_S, self._refresh)

    def _refresh(self) -> None:
        health = self._health_of()
        if health is not self.health:
            self.health = health
            self.query_one("#health-body", Static).update(render_health_screen(health))


def render_health_screen(health: GpuHealth | None) -> RenderableType:
    if health is None:
        return Text("Not read: the card is lost, or this user may not ask it.", style="yellow")
    result = verdict(health)
    level = Text.assemble(("verdict  ", "bold"), (result.level, STYLES[result.level]))
    reasons = Table.grid(padding=(0, 1))
    reasons.add_column(no_wrap=True)
    reasons.add_column(ratio=1)
    for reason in result.reasons:
        reasons.add_row(
            Text("✖" if reason.level == "critical" else "⚠", style=STYLES[reason.level]),
            Text.assemble(reason.text, (f": {sentence(reason.action)}", "dim")),
        )
    counters = Table.grid(padding=(0, 2))
    counters.add_column(style="bold", no_wrap=True)
    counters.add_column(ratio=1)
    for name, value in counter_rows(health):
        counters.add_row(name, value)
    if health.read_at is not None:
        counters.add_row("read at", Text(_clock(health.read_at), style="dim"))
    if health.refused:
        counters.add_row("not allowed", plain(", ".join(health.refused)))  # a host's words
    return Group(level, reasons, Text(""), counters, Text(""), *xid_block(health))


def xid_block(health: GpuHealth) -> list[RenderableType]:
    """The Xids, newest first: a time column, and beside it what each means and what to do."""
    if health.xid_events is None:
        return [Text.assemble(("Xids  ", "bold"), (XIDS_UNKNOWN, "yellow"))]
    sources = " and ".join(health.xid_sources)
    if not health.xid_events:
        return [Text.assemble(("Xids  ", "bold"), f"none since gputop started (from {sources})")]
    title = Text.assemble(("Xids", "bold"), (f"  from {sources}, newest first", "dim"))
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True, style="dim")
    table.add_column(ratio=1)
    for event in reversed(health.xid_events):
        info = describe(event.xid)
        count = f" ({event.count}x)" if event.count > 1 else ""
        table.add_row(
            _clock(event.time),
            Text.assemble(
                (f"Xid {event.xid} {info.short}{count}", STYLES[info.severity]),
                f"\n{info.meaning}\n",
                ("→ ", "bold"),
                (sentence(info.action), "italic"),
            ),
        )
    parts: list[RenderableType] = [title, table]
    if (counted := xids_in_all(health)) is not None:
        parts.append(Text(f"in all: {counted}", style="dim"))
    return parts


def sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _clock(epoch: float) -> str:
    """``12-01 23:14:05``: local time, the year left out."""
    return time.strftime("%m-%d %H:%M:%S", time.localtime(epoch))


def counter_rows(health: GpuHealth) -> list[tuple[str, str]]:
    """Each counter's name and reading, or that the card does not have it."""
    ecc, pages, rows = health.ecc, health.retired_pages, health.remapped_rows
    return [
        ("ECC errors", NOT_HERE if ecc is None else (
            f"this boot {_n(ecc.corrected_volatile)} corrected, "
            f"{_n(ecc.uncorrected_volatile)} uncorrectable · over its life "
            f"{_n(ecc.corrected_aggregate)} corrected, "
            f"{_n(ecc.uncorrected_aggregate)} uncorrectable"
        )),
        ("retired pages", NOT_HERE if pages is None else (
            f"{_n(pages.single_bit)} for single-bit errors, {_n(pages.double_bit)} for "
            f"double-bit, pending {_yes(pages.pending)}"
        )),
        ("remapped rows", NOT_HERE if rows is None else (
            f"{rows.correctable} correctable, {rows.uncorrectable} uncorrectable, "
            f"pending {_yes(rows.pending)}, failed {_yes(rows.failed)}"
        )),
        ("PCIe replays", NOT_HERE if health.pcie_replays is None else str(health.pcie_replays)),
        ("NVLink CRC errors", NOT_HERE if health.nvlink_crc_errors is None
            else str(health.nvlink_crc_errors)),
    ]  # fmt: skip


def xids_in_all(health: GpuHealth) -> str | None:
    """``Xid 13: 1, Xid 79: 3`` where the events kept do not count every Xid."""
    totals = dict(health.xid_counts)
    if sum(totals.values()) <= sum(e.count for e in health.xid_events or ()):
        return None
    return ", ".join(f"Xid {code}: {n}" for code, n in sorted(totals.items()))


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _yes(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")
