"""The cards of every GPU, the highlight that moves across them, and the selection.

With nothing selected, the highlighted card is the selection: a person who just moves to a
free card and presses the launch key should get that card.
"""

from __future__ import annotations

import math

from textual.binding import Binding
from textual.containers import Grid
from textual.message import Message

from gputop.core.history import UtilizationHistory
from gputop.core.model import Snapshot
from gputop.tui.widgets.gpu_card import CardView, GpuCard

MIN_CARD_WIDTH = 38


class GpuGrid(Grid, can_focus=True):
    BINDINGS = [
        Binding("left,k", "move(-1)", "Prev card", show=False),
        Binding("right,j", "move(1)", "Next card", show=False),
        Binding("up", "move_row(-1)", "Card above", show=False),
        Binding("down", "move_row(1)", "Card below", show=False),
    ]

    class SelectionChanged(Message):
        """The highlight or the selection moved; ``cards`` is what a launch would use."""

        def __init__(self, highlighted: int | None, cards: tuple[int, ...]) -> None:
            super().__init__()
            self.highlighted = highlighted
            self.cards = cards

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._physical: list[int] = []
        self._position = 0
        self._selected: set[int] = set()
        self._snapshot: Snapshot | None = None
        self._history: UtilizationHistory | None = None
        self.compact = False

    # -- state -------------------------------------------------------------------------

    @property
    def highlighted(self) -> int | None:
        """The physical index of the highlighted card."""
        return self._physical[self._position] if self._physical else None

    @property
    def selection(self) -> tuple[int, ...]:
        """Selected cards in physical order, or the highlighted card when none is."""
        if self._selected:
            return tuple(sorted(self._selected))
        return () if self.highlighted is None else (self.highlighted,)

    @property
    def explicitly_selected(self) -> frozenset[int]:
        return frozenset(self._selected)

    def toggle_highlighted(self) -> None:
        if self.highlighted is None:
            return
        self._selected ^= {self.highlighted}
        self._changed()

    def select_all(self) -> None:
        self._selected = set(self._physical)
        self._changed()

    def clear_selection(self) -> None:
        self._selected.clear()
        self._changed()

    def action_move(self, step: int) -> None:
        if self._physical:
            self._position = (self._position + step) % len(self._physical)
            self._changed()

    def action_move_row(self, step: int) -> None:
        if self._physical:
            columns = 1 if self.compact else self._columns()
            target = self._position + step * columns
            if 0 <= target < len(self._physical):
                self._position = target
                self._changed()

    # -- data ----------------------------------------------------------------------------

    def show(self, snapshot: Snapshot, history: UtilizationHistory, compact: bool) -> None:
        physical = [gpu.physical_index for gpu in snapshot.gpus]
        if physical != self._physical:
            self._rebuild(physical)
        self._snapshot, self._history = snapshot, history
        if compact != self.compact:
            self.compact = compact
            self._layout()
        self._paint()

    def _rebuild(self, physical: list[int]) -> None:
        first = not self._physical
        self._physical = physical
        self._position = min(self._position, max(len(physical) - 1, 0))
        self._selected &= set(physical)
        self.remove_children()
        self.mount_all(GpuCard(index) for index in physical)
        self._layout()
        if first:
            self.call_after_refresh(self._changed)

    def _paint(self) -> None:
        if self._snapshot is None or self._history is None:
            return
        cards = {card.physical_index: card for card in self.query(GpuCard)}
        for position, gpu in enumerate(self._snapshot.gpus):
            card = cards.get(gpu.physical_index)
            if card is None:
                continue
            card.show(
                CardView(
                    gpu=gpu,
                    history=self._history.series(gpu.uuid, gpu.physical_index),
                    highlighted=position == self._position,
                    selected=gpu.physical_index in self._selected,
                    compact=self.compact,
                )
            )

    def _changed(self) -> None:
        self._paint()
        self.post_message(self.SelectionChanged(self.highlighted, self.selection))

    # -- layout --------------------------------------------------------------------------

    def on_resize(self) -> None:
        self._layout()

    def _columns(self) -> int:
        count = max(len(self._physical), 1)
        width = self.size.width or self.app.size.width
        fit = max(1, width // MIN_CARD_WIDTH)
        if count <= fit:
            return count
        rows = math.ceil(count / fit)
        return math.ceil(count / rows)

    def _layout(self) -> None:
        count = max(len(self._physical), 1)
        if self.compact:
            self.styles.grid_size_columns = 1
            self.styles.grid_rows = "1"
            self.styles.height = count
            return
        columns = self._columns()
        rows = math.ceil(count / columns)
        self.styles.grid_size_columns = columns
        self.styles.grid_rows = "8"
        self.styles.height = rows * 8
