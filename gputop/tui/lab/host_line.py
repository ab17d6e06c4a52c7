"""A host's summary line in the lab dashboard: its text, and the widget that paints it.

``▾ gpu1  live  2/4 free  49G mem free  top alice``: host names and users are untrusted
text, cleaned and never parsed as markup. The widget paints itself and only when its text
changes (docs/speed.md, "The lab").
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import pairwise

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gputop.core.remote.host_summary import HostSummary
from gputop.core.remote.status import HostStatus
from gputop.core.safe_text import clean
from gputop.core.units import counted, human_bytes


def memory_free_text(value_bytes: int) -> str:
    """A host's free GPU memory, summed over its cards, for its summary line: whole GiB from
    10 GiB up (``49G``), one decimal below (``3.5G``), MiB under 1 GiB. A summary is read
    to choose a host; tenths of a GiB across eight cards only flicker, every second."""
    gib = value_bytes / 1024**3
    if gib >= 10:
        return f"{gib:.0f}G"
    return human_bytes(value_bytes)


def summary_line(summary: HostSummary, expanded: bool, highlighted: bool, width: int) -> Text:
    """``▾ gpu1  live  2/4 free  31.5 GiB free  top alice``: host names are untrusted text."""
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append("▾ " if expanded else "▸ ", style="bold")
    line.append(clean(summary.host), style="bold reverse" if highlighted else "bold cyan")
    line.append("  ")
    line.append(clean(summary.state_text), style="" if summary.healthy else "bold yellow")
    if summary.gpu_count:
        free_style = "green" if summary.free_cards else "dim"
        line.append(f"  {summary.free_cards}/{summary.gpu_count} free", style=free_style)
        if summary.memory_free_bytes is not None:
            line.append(f"  {memory_free_text(summary.memory_free_bytes)} mem free")
        if summary.busiest_user:
            line.append("  top ", style="dim")
            line.append(clean(summary.busiest_user))
    line.truncate(max(width, 10), overflow="ellipsis")
    return line


class HostLine(Widget):
    """A host's summary line, painted through the Line API: one cached strip, redrawn only
    when its text, width or style changes (twenty of these change every second in a busy
    lab)."""

    DEFAULT_CSS = """
    HostLine { height: 1; padding: 0 1; background: $panel; }
    """

    def __init__(self, position: int) -> None:
        super().__init__(id=f"host-{position}", classes="host-line")
        self.auto_links = False  # no links here: spare Textual a look at the hover style
        self.text = Text()
        self._base: Style | None = None
        """The line's style, kept until Textual says the styles changed: working it out
        walks every ancestor's background."""
        self._version = 0
        self._painted: tuple[tuple[object, ...], list[Strip]] | None = None
        """The last paint, whole, and what it was painted from (see ``render_lines``)."""

    @property
    def plain(self) -> str:
        return self.text.plain

    def set_text(self, text: Text) -> None:
        self.text = text
        self._version += 1
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = None
        self._painted = None

    def render_lines(self, crop: Region) -> list[Strip]:
        """The line, painted here, and painted again only when it changed.

        Textual paints every widget under the frame's dirty area each frame, and twenty
        summary lines then cost as much as the rest of the lab (docs/speed.md). What a
        paint depends on: the text (``_version``), the crop (the size) and the styles,
        which Textual announces through ``notify_style_update``. The line has no border,
        tint or opacity, so it is painted without Textual's general styles machinery:
        padding in the background colour, the text, and the app's line filters, exactly
        as Textual would (tests/tui/test_dashboard_lab.py compares the two).
        """
        key = (self._version, crop)
        if self._painted is not None and self._painted[0] == key:
            return self._painted[1]
        lines = self._paint(crop)
        self._painted = (key, lines)
        return lines

    def _paint(self, crop: Region) -> list[Strip]:
        width = self.region.width
        padding = self.styles.padding
        _, background = self.background_colors
        base = self._base
        if base is None:
            base = self._base = self.rich_style
        pad = Style(bgcolor=background.rich_color)
        inner = max(0, width - padding.left - padding.right)
        filters = self.get_line_filters()
        lines = []
        for y in crop.line_range:
            if y != padding.top:
                segments = [Segment(" " * width, pad)]
            else:
                text = _segments(self.text, base, self.app.console)
                segments = [
                    Segment(" " * padding.left, pad),
                    *Segment.adjust_line_length(text, inner, base),
                    Segment(" " * padding.right, pad),
                ]
                segments = [segment for segment in segments if segment.text]
            strip = Strip(segments, width)
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, background)
            lines.append(strip.crop(crop.x, crop.right) if crop.width != width else strip)
        return lines

    def render_line(self, y: int) -> Strip:
        """A line as Textual's general painting asks for it (``render_lines`` paints the
        widget itself; a test compares the two)."""
        width = self.size.width
        base = self.rich_style
        if y != 0:
            return Strip.blank(width, base)
        return Strip(_segments(self.text, base, self.app.console)).crop_extend(0, width, base)


def _segments(text: Text, base: Style, console: Console) -> list[Segment]:
    """``text`` as segments over ``base``: straight from its spans where they do not
    overlap (a summary line's never do), which is several times cheaper than Rich's
    general rendering of a ``Text``, used otherwise."""
    plain = text.plain
    spans = sorted(text.spans, key=lambda span: span.start)
    if any(a.end > b.start for a, b in pairwise(spans)):
        return list(Segment.apply_style(text.render(console), base))
    over = base + (Style.parse(text.style) if isinstance(text.style, str) else text.style)
    segments: list[Segment] = []
    position = 0
    for span in spans:
        if span.start > position:
            segments.append(Segment(plain[position : span.start], over))
        style = Style.parse(span.style) if isinstance(span.style, str) else span.style
        segments.append(Segment(plain[span.start : span.end], over + style))
        position = max(position, span.end)
    if position < len(plain):
        segments.append(Segment(plain[position:], over))
    return segments


def lab_status_line(statuses: Sequence[HostStatus], interval_s: float, now: float) -> Text:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status.state.value] = counts.get(status.state.value, 0) + 1
    gpus = sum(len(s.snapshot.gpus) for s in statuses if s.snapshot is not None)
    line = Text.assemble(
        ("gputop", "bold"), f"  lab: {counted(len(statuses), 'host')}, {counted(gpus, 'GPU')}"
    )
    for state in ("live", "connecting", "stale", "unreachable"):
        if counts.get(state):
            style = "" if state == "live" else "bold yellow"
            line.append(f"  {counts[state]} {state}", style=style)
    line.append(f"  {time.strftime('%H:%M:%S', time.localtime(now))}")
    line.append(f"  every {interval_s:g} s", style="dim")
    line.truncate(300)
    return line
