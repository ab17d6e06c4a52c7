"""The cards of every host, grouped by host, each group under a one-line summary.

The highlight moves across every card of every expanded host (a collapsed host is one stop:
its summary line). A selection belongs to one host: selecting a card on another host starts
a new selection there (the app says so). When the groups do not fit, every host but the
highlighted one collapses to its summary line unless a person expanded it (``c``); ``C``
collapses or expands them all; ``g`` / ``G`` jump to the next / previous host. See
docs/lab.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, VerticalScroll
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from gputop.core.model import GpuSample
from gputop.core.remote.host_summary import HostSummary
from gputop.core.remote.status import HostStatus
from gputop.core.safe_text import clean
from gputop.core.sampling.history import UtilizationHistory
from gputop.core.units import human_bytes
from gputop.tui.widgets.gpu_card import CardView, GpuCard
from gputop.tui.widgets.gpu_grid import MIN_CARD_WIDTH

CARD_HEIGHT = 8
"""A whole card, border included (as the one-host grid lays them out)."""


@dataclass(frozen=True)
class Stop:
    """Where the highlight can be: a card of a host, or a host's summary line (card None)."""

    host: int
    card: int | None


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
        self._strip: tuple[int, Style, Strip] | None = None
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
        self._strip = None
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
        as Textual would (tests/test_dashboard_lab.py compares the two).
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
        width = self.size.width
        base = self._base
        if base is None:
            base = self._base = self.rich_style
        if y != 0:
            return Strip.blank(width, base)
        if self._strip is None or self._strip[:2] != (width, base):
            strip = Strip(_segments(self.text, base, self.app.console)).crop_extend(0, width, base)
            self._strip = (width, base, strip)
        return self._strip[2]


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


class HostGroup:
    """One host: its summary line and its cards, two widgets of the lab grid.

    Not a container: a widget per host more is one more widget that Textual composites in
    every frame, twenty of them in a big lab (docs/speed.md).
    """

    def __init__(self, position: int) -> None:
        self.position = position
        self.physical: list[int] = []
        self.line = HostLine(position)
        self.cards = Grid(classes="host-cards")
        self._shape: tuple[object, ...] | None = None
        self._line_key: tuple[object, ...] | None = None

    def show_summary(self, summary: HostSummary, expanded: bool, on_line: bool, width: int) -> None:
        """Repaint the summary line only when what it shows changed (no layout pass)."""
        # Keyed on what the line shows, not on the summary: exact free bytes change every
        # second while "49G mem free" does not; the text is built only when it changed.
        key = (
            summary.host,
            summary.state_text,
            summary.healthy,
            summary.gpu_count,
            summary.free_cards,
            None
            if summary.memory_free_bytes is None
            else memory_free_text(summary.memory_free_bytes),
            summary.busiest_user,
            expanded,
            on_line,
            width,
        )
        if key != self._line_key:
            self._line_key = key
            self.line.set_text(summary_line(summary, expanded, on_line, width))

    def set_cards(self, physical: list[int]) -> None:
        if physical == self.physical:
            return
        self.physical = physical
        self._shape = None
        self.cards.remove_children()
        self.cards.mount_all(GpuCard(index) for index in physical)

    def lay_out(self, columns: int, compact: bool, expanded: bool) -> None:
        shape = (columns, compact, expanded, len(self.physical))
        if shape == self._shape:
            return  # setting a style, even to its value, costs a layout pass
        self._shape = shape
        self.cards.display = expanded and bool(self.physical)
        count = max(len(self.physical), 1)
        if compact:
            self.cards.styles.grid_size_columns = 1
            self.cards.styles.grid_rows = "1"
            self.cards.styles.height = count
        else:
            columns = max(1, min(columns, count))
            self.cards.styles.grid_size_columns = columns
            self.cards.styles.grid_rows = str(CARD_HEIGHT)
            self.cards.styles.height = math.ceil(count / columns) * CARD_HEIGHT


class LabGrid(VerticalScroll, can_focus=True):
    BINDINGS = [
        Binding("left,k", "move(-1)", "Prev card", show=False),
        Binding("right,j", "move(1)", "Next card", show=False),
        Binding("up", "move_row(-1)", "Card above", show=False),
        Binding("down", "move_row(1)", "Card below", show=False),
    ]

    DEFAULT_CSS = """
    LabGrid { height: auto; scrollbar-size-vertical: 1; }
    LabGrid > .host-cards { height: auto; grid-gutter: 0 0; }
    """

    class SelectionChanged(Message):
        """The highlight or selection moved. ``host`` is the highlighted card's host
        position; ``cards`` what a launch there would use (physical indices)."""

        def __init__(self, host: int, highlighted: int | None, cards: tuple[int, ...]) -> None:
            super().__init__()
            self.host = host
            self.highlighted = highlighted
            self.cards = cards

    class SelectionMoved(Message):
        """A card on another host was selected: the old selection was dropped."""

        def __init__(self, old_host: int, new_host: int) -> None:
            super().__init__()
            self.old_host = old_host
            self.new_host = new_host

    def __init__(self, host_count: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups = [HostGroup(position) for position in range(host_count)]
        self.statuses: list[HostStatus | None] = [None] * host_count
        self.summaries: list[HostSummary | None] = [None] * host_count
        self.histories = [UtilizationHistory() for _ in range(host_count)]
        self.expanded_by_person: dict[int, bool] = {}
        """Hosts a person expanded or collapsed; the others follow the fitting rule."""
        self.compact = False
        self.max_lines = 1000
        self._stop = Stop(0, None)
        self._selected: set[int] = set()
        self._selected_host: int | None = None
        self._fits = True
        self._shape: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
        for group in self.groups:
            yield group.line
            yield group.cards

    # -- state ---------------------------------------------------------------------------

    @property
    def host(self) -> int:
        """The highlighted host's position."""
        return self._stop.host

    @property
    def highlighted(self) -> int | None:
        """The highlighted card's physical index (None on a summary line)."""
        group = self.groups[self._stop.host]
        if self._stop.card is None or self._stop.card >= len(group.physical):
            return None
        return group.physical[self._stop.card]

    @property
    def selected_host(self) -> int | None:
        return self._selected_host if self._selected else None

    @property
    def selection(self) -> tuple[int, ...]:
        """The selected cards of the selection's host, or the highlighted card."""
        if self._selected:
            return tuple(sorted(self._selected))
        return () if self.highlighted is None else (self.highlighted,)

    @property
    def selection_host(self) -> int:
        """Where a launch goes: the selection's host, else the highlighted one."""
        return (
            self._selected_host
            if self._selected and self._selected_host is not None
            else (self.host)
        )

    def is_expanded(self, position: int) -> bool:
        if position in self.expanded_by_person:
            return self.expanded_by_person[position]
        return self._fits or position == self._stop.host

    def _stops(self) -> list[Stop]:
        stops: list[Stop] = []
        for position, group in enumerate(self.groups):
            if self.is_expanded(position) and group.physical:
                stops.extend(Stop(position, card) for card in range(len(group.physical)))
            else:
                stops.append(Stop(position, None))
        return stops

    # -- actions -------------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        stops = self._stops()
        where = stops.index(self._stop) if self._stop in stops else 0
        self._stop = stops[(where + step) % len(stops)]
        self._changed()

    def action_move_row(self, step: int) -> None:
        group = self.groups[self._stop.host]
        columns = 1 if self.compact else self._columns(len(group.physical))
        if self._stop.card is not None:
            target = self._stop.card + step * columns
            if 0 <= target < len(group.physical):
                self._stop = Stop(self._stop.host, target)
                self._changed()
                return
        self.action_move(step)

    def jump_host(self, step: int) -> None:
        position = (self._stop.host + step) % len(self.groups)
        self._stop = Stop(position, 0 if self.groups[position].physical else None)
        self._relayout()
        if not self.is_expanded(position):
            self._stop = Stop(position, None)
        self._changed()

    def toggle_collapsed(self) -> None:
        position = self._stop.host
        self.expanded_by_person[position] = not self.is_expanded(position)
        if not self.expanded_by_person[position]:
            self._stop = Stop(position, None)
        elif self.groups[position].physical:
            self._stop = Stop(position, 0)
        self._relayout()
        self._changed()

    def toggle_all(self) -> bool:
        """Collapse every host, or expand every host if all were collapsed; True: expanded."""
        expand = not any(self.is_expanded(p) for p in range(len(self.groups)))
        self.expanded_by_person = {p: expand for p in range(len(self.groups))}
        if not expand:
            self._stop = Stop(self._stop.host, None)
        self._relayout()
        self._changed()
        return expand

    def toggle_highlighted(self) -> None:
        card = self.highlighted
        if card is None:
            return
        if self._selected and self._selected_host != self._stop.host:
            old = self._selected_host
            self._selected = set()
            if old is not None:
                self.post_message(self.SelectionMoved(old, self._stop.host))
        self._selected_host = self._stop.host
        self._selected ^= {card}
        self._changed()

    def select_all(self) -> None:
        old = self._selected_host if self._selected else None
        self._selected_host = self._stop.host
        self._selected = set(self.groups[self._stop.host].physical)
        if old is not None and old != self._stop.host:
            self.post_message(self.SelectionMoved(old, self._stop.host))
        self._changed()

    def clear_selection(self) -> None:
        self._selected.clear()
        self._changed()

    # -- data ----------------------------------------------------------------------------

    def show(self, statuses: list[HostStatus], summaries: list[HostSummary]) -> None:
        for position, status in enumerate(statuses):
            before = self.statuses[position]
            if status.snapshot is not None and (
                before is None or before.snapshot is not status.snapshot
            ):
                self.histories[position].add(status.snapshot)
            self.statuses[position] = status
            self.summaries[position] = summaries[position]
            physical = [g.physical_index for g in status.snapshot.gpus] if status.snapshot else []
            if physical != self.groups[position].physical:
                self.groups[position].set_cards(physical)
                if position == self._selected_host:
                    self._selected &= set(physical)
        first = self._stop.card is None and self.groups[self._stop.host].physical
        if first and self.is_expanded(self._stop.host):
            self._stop = Stop(self._stop.host, 0)
            self._relayout()
            self._paint()
            self.post_message(self.SelectionChanged(self.host, self.highlighted, self.selection))
            return
        self._relayout()
        self._paint()

    def set_geometry(self, compact: bool, max_lines: int) -> None:
        if (compact, max_lines) != (self.compact, self.max_lines):
            self.compact, self.max_lines = compact, max_lines
            self.styles.max_height = max_lines
            self._relayout()
            self._paint()

    def _columns(self, count: int) -> int:
        width = self.size.width or self.app.size.width
        fit = max(1, width // MIN_CARD_WIDTH)
        count = max(count, 1)
        if count <= fit:
            return count
        return math.ceil(count / math.ceil(count / fit))

    def _group_lines(self, group: HostGroup) -> int:
        if not group.physical:
            return 1
        if self.compact:
            return 1 + len(group.physical)
        columns = self._columns(len(group.physical))
        return 1 + math.ceil(len(group.physical) / columns) * CARD_HEIGHT

    def _relayout(self) -> None:
        width = self.size.width or self.app.size.width
        cards = tuple(tuple(g.physical) for g in self.groups)
        shape = (
            cards,
            width,
            self.compact,
            self.max_lines,
            self._stop.host,
            tuple(sorted(self.expanded_by_person.items())),
        )
        if shape == self._shape:
            return  # nothing that decides the layout changed: most ticks
        self._shape = shape
        self._fits = sum(self._group_lines(g) for g in self.groups) <= self.max_lines
        if not self.is_expanded(self._stop.host):
            self._stop = Stop(self._stop.host, None)
        for position, group in enumerate(self.groups):
            group.lay_out(
                self._columns(len(group.physical)), self.compact, self.is_expanded(position)
            )

    def _paint(self) -> None:
        width = max((self.size.width or self.app.size.width) - 3, 10)
        for position, group in enumerate(self.groups):
            summary = self.summaries[position]
            status = self.statuses[position]
            expanded = self.is_expanded(position)
            on_line = position == self._stop.host and self._stop.card is None
            if summary is not None:
                group.show_summary(summary, expanded, on_line, width)
            if not expanded or status is None or status.snapshot is None:
                continue
            cards = {card.physical_index: card for card in group.cards.query(GpuCard)}
            for place, gpu in enumerate(status.snapshot.gpus):
                card = cards.get(gpu.physical_index)
                if card is not None:
                    card.show(self._view(position, place, gpu))

    def _view(self, position: int, place: int, gpu: GpuSample) -> CardView:
        highlighted = self._stop == Stop(position, place)
        return CardView(
            gpu=gpu,
            history=self.histories[position].series(gpu.uuid, gpu.physical_index),
            highlighted=highlighted,
            selected=position == self._selected_host and gpu.physical_index in self._selected,
            compact=self.compact,
        )

    def _changed(self) -> None:
        self._paint()
        group = self.groups[self._stop.host]
        target: Widget = group.line
        cards = list(group.cards.query(GpuCard))
        if self._stop.card is not None and self._stop.card < len(cards):
            target = cards[self._stop.card]
        self.scroll_to_widget(group.line, animate=False)
        self.scroll_to_widget(target, animate=False)
        self.post_message(self.SelectionChanged(self.host, self.highlighted, self.selection))
