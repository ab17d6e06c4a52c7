"""The cards of every host, grouped by host, each group under a one-line summary.

The highlight moves across every card of every expanded host (a collapsed host is one stop:
its summary line). A selection belongs to one host: selecting a card on another host starts
a new selection there (the app says so). When the groups do not fit, every host but the
highlighted one collapses to its summary line unless a person expanded it (``c``). See
docs/lab.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.message import Message

from gputop.core.records import frozen, mutable
from gputop.core.remote.host_summary import HostSummary
from gputop.core.remote.status import HostStatus
from gputop.core.sampling.history import UtilizationHistory
from gputop.tui.lab.host_line import HostLine, memory_free_text, summary_line
from gputop.tui.widgets.card_frame import CARD_HEIGHT
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.grid_layout import CARD_KEYS, columns_for


@frozen(slots=False)
class HighlightPlace:
    """Where the highlight can be: a card of a host, or a host's summary line (card None)."""

    host: int
    card: int | None


class HostCards(GpuGrid, can_focus=False):
    """One host's cards, drawn as the local dashboard draws its own (one widget for them
    all); the lab grid moves the highlight and the selection across hosts and marks them."""

    lab_focused = False
    """Whether the lab grid has the focus: its highlighted card shows it in full colour."""

    def mark(self, highlighted: int | None, selected: set[int], focused: bool) -> None:
        """The highlighted card's place among these cards (None: on another host or on the
        summary line) and the selected cards' physical indices."""
        self._position = -1 if highlighted is None else highlighted
        self._selected = set(selected)
        self.lab_focused = focused

    def _focus_shown(self) -> bool:
        return self.lab_focused

    def _changed(self) -> None:
        self._paint()  # what moved is the lab grid's to say

    def columns_shown(self) -> int:
        """The cards to a row as they are drawn."""
        return 1 if self.compact else self._columns()

    def virtual_card_region(self, place: int) -> Region | None:
        """Where the card at ``place`` is in the lab grid's scrolled space, once laid out."""
        if place >= len(self._physical) or not self.size:
            return None
        region = self.card_region(self._physical[place])
        return region.translate(self.virtual_region.offset - self.content_region.offset)


class HostGroup:
    """One host: its summary line and its cards, two widgets of the lab grid.

    Not a container: a widget per host more is one more widget that Textual composites in
    every frame, twenty of them in a big lab (docs/speed.md).
    """

    def __init__(self, position: int) -> None:
        self.physical: list[int] = []
        self.line = HostLine(position)
        self.cards = HostCards()
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

    def lay_out(self, expanded: bool) -> None:
        shown = expanded and bool(self.physical)
        if shown != self.cards.display:  # setting a style, even to its value, costs a layout
            self.cards.display = shown

    def cards_height(self, columns: int, compact: bool) -> int:
        """The lines its cards take (one card's at least), ``columns`` of them to a row."""
        count = max(len(self.physical), 1)
        return count if compact else math.ceil(count / max(1, min(columns, count))) * CARD_HEIGHT


class LabGrid(VerticalScroll, can_focus=True):
    BINDINGS = [*CARD_KEYS]

    DEFAULT_CSS = """
    LabGrid { height: auto; scrollbar-size-vertical: 1; }
    """

    @mutable
    class SelectionChanged(Message):
        """The highlight or selection moved. ``host`` is the highlighted card's host
        position; ``cards`` what a launch there would use (physical indices)."""

        host: int
        highlighted: int | None
        cards: tuple[int, ...]

    @mutable
    class SelectionMoved(Message):
        """A card on another host was selected: the old selection was dropped."""

        old_host: int
        new_host: int

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
        self._place = HighlightPlace(0, None)
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
        return self._place.host

    @property
    def highlighted(self) -> int | None:
        """The highlighted card's physical index (None on a summary line)."""
        group = self.groups[self._place.host]
        if self._place.card is None or self._place.card >= len(group.physical):
            return None
        return group.physical[self._place.card]

    @property
    def selection(self) -> tuple[int, ...]:
        """The selected cards of the selection's host, or the highlighted card."""
        if self._selected:
            return tuple(sorted(self._selected))
        return () if self.highlighted is None else (self.highlighted,)

    @property
    def selection_host(self) -> int:
        """Where a launch goes: the selection's host, else the highlighted one."""
        selected = self._selected_host if self._selected else None
        return self.host if selected is None else selected

    def is_expanded(self, position: int) -> bool:
        """As a person left it, else by the fitting rule (the highlighted host always)."""
        return self.expanded_by_person.get(position, self._fits or position == self._place.host)

    def _places(self) -> list[HighlightPlace]:
        places: list[HighlightPlace] = []
        for position, group in enumerate(self.groups):
            if self.is_expanded(position) and group.physical:
                places.extend(HighlightPlace(position, card) for card in range(len(group.physical)))
            else:
                places.append(HighlightPlace(position, None))
        return places

    # -- actions -------------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        places = self._places()
        where = places.index(self._place) if self._place in places else 0
        self._place = places[(where + step) % len(places)]
        self._changed()

    def action_move_row(self, step: int) -> None:
        group = self.groups[self._place.host]
        columns = group.cards.columns_shown()
        if self._place.card is not None:
            target = self._place.card + step * columns
            if 0 <= target < len(group.physical):
                self._place = HighlightPlace(self._place.host, target)
                self._changed()
                return
        self.action_move(step)

    def jump_host(self, step: int) -> None:
        position = (self._place.host + step) % len(self.groups)
        self._place = HighlightPlace(position, 0 if self.groups[position].physical else None)
        self._relayout()
        if not self.is_expanded(position):
            self._place = HighlightPlace(position, None)
        self._changed()

    def toggle_collapsed(self) -> None:
        position = self._place.host
        self.expanded_by_person[position] = not self.is_expanded(position)
        if not self.expanded_by_person[position]:
            self._place = HighlightPlace(position, None)
        elif self.groups[position].physical:
            self._place = HighlightPlace(position, 0)
        self._relayout()
        self._changed()

    def toggle_all(self) -> bool:
        """Collapse every host, or expand every host if all were collapsed; True: expanded."""
        expand = not any(self.is_expanded(p) for p in range(len(self.groups)))
        self.expanded_by_person = {p: expand for p in range(len(self.groups))}
        if not expand:
            self._place = HighlightPlace(self._place.host, None)
        self._relayout()
        self._changed()
        return expand

    def toggle_highlighted(self) -> None:
        card = self.highlighted
        if card is not None:
            self._select_on_host(lambda selected: selected ^ {card})

    def select_all(self) -> None:
        self._select_on_host(lambda _: set(self.groups[self._place.host].physical))

    def _select_on_host(self, change: Callable[[set[int]], set[int]]) -> None:
        """The selection ``change`` makes on the highlighted host; one on another host is
        dropped first (a selection belongs to one host), and that said."""
        host, old = self._place.host, self._selected_host if self._selected else None
        kept = self._selected if old == host else set()
        if old is not None and old != host:
            self.post_message(self.SelectionMoved(old, host))
        self._selected_host = host
        self._selected = change(kept)
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
                self.groups[position].physical = physical
                if position == self._selected_host:
                    self._selected &= set(physical)
        first = self._place.card is None and bool(self.groups[self._place.host].physical)
        first = first and self.is_expanded(self._place.host)
        if first:
            self._place = HighlightPlace(self._place.host, 0)
        self._relayout()
        self._paint()
        if first:
            self.post_message(self.SelectionChanged(self.host, self.highlighted, self.selection))

    def set_geometry(self, compact: bool, max_lines: int) -> None:
        if (compact, max_lines) != (self.compact, self.max_lines):
            self.compact, self.max_lines = compact, max_lines
            self.styles.max_height = max_lines
            self._relayout()
            self._paint()

    @property
    def _width(self) -> int:
        return self.size.width or self.app.size.width

    def _columns(self, count: int) -> int:
        """As the cards take them: beside the scrollbar where it shows."""
        return columns_for(count, self.scrollable_content_region.width or self._width)

    def _group_lines(self, group: HostGroup) -> int:
        """Its summary line and, expanded, its cards."""
        if not group.physical:
            return 1
        return 1 + group.cards_height(self._columns(len(group.physical)), self.compact)

    def _relayout(self) -> None:
        width = self._width
        cards = tuple(tuple(g.physical) for g in self.groups)
        shape = (
            cards,
            width,
            self.compact,
            self.max_lines,
            self._place.host,
            tuple(sorted(self.expanded_by_person.items())),
        )
        if shape == self._shape:
            return  # nothing that decides the layout changed: most ticks
        self._shape = shape
        self._fits = sum(self._group_lines(g) for g in self.groups) <= self.max_lines
        if not self.is_expanded(self._place.host):
            self._place = HighlightPlace(self._place.host, None)
        for position, group in enumerate(self.groups):
            group.lay_out(self.is_expanded(position))

    def on_focus(self) -> None:
        self._paint(focused=True)  # Textual sets ``has_focus`` after this handler

    def on_blur(self) -> None:
        self._paint(focused=False)

    def _paint(self, focused: bool | None = None) -> None:
        focused = self.has_focus if focused is None else focused
        width = max(self._width - 3, 10)
        for position, group in enumerate(self.groups):
            summary = self.summaries[position]
            status = self.statuses[position]
            expanded = self.is_expanded(position)
            on_line = position == self._place.host and self._place.card is None
            if summary is not None:
                group.show_summary(summary, expanded, on_line, width)
            if not expanded or status is None or status.snapshot is None:
                continue
            on_host = self._place.host == position
            selected = self._selected if position == self._selected_host else set()
            group.cards.mark(self._place.card if on_host else None, selected, focused)
            group.cards.show(status.snapshot, self.histories[position], self.compact)

    def _changed(self) -> None:
        self._paint()
        group = self.groups[self._place.host]
        self.scroll_to_widget(group.line, animate=False)
        if self._place.card is not None:
            card = group.cards.virtual_card_region(self._place.card)
            if card is not None:
                self.scroll_to_region(card, animate=False)
        self.post_message(self.SelectionChanged(self.host, self.highlighted, self.selection))
