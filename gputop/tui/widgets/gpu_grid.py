"""The cards of every GPU, the highlight that moves across them, and the selection.

With nothing selected the highlighted card is the selection (move to a free card, launch);
``m`` moves the highlight through a MIG card's instances. One widget draws every card line
by line, as Textual drew the card widgets (gputop.tcss ``GpuGrid > .gpu-grid--*``), and
repaints only the changed lines: a widget per card cost five widgets' work for every changed
screen line (docs/speed.md, "The busy server").
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import NamedTuple

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.widget import Widget

from gputop.core.claims.view import card_claim_text
from gputop.core.model import GpuSample, MigDevice, Snapshot
from gputop.core.records import mutable
from gputop.core.sampling.history import UtilizationHistory
from gputop.tui.render import sticky_level_style
from gputop.tui.widgets.card_frame import (
    CARD_HEIGHT,
    Palette,
    border_kind,
    draw_row,
    make_palette,
    title_kind,
)
from gputop.tui.widgets.gpu_card import (
    LABEL_CELLS_RESERVED,
    CardView,
    LineStrips,
    _lines_for,
    _subtitle,
    _title,
)
from gputop.tui.widgets.grid_layout import CARD_KEYS, changed_span, columns_for, place


class CardState(NamedTuple):
    """What a card shows of the grid's state (the classes a card widget had)."""

    lost: bool
    highlighted: bool
    selected: bool
    compact: bool


class _Card:
    """One card's lines as last shown, and its rendered rows."""

    __slots__ = ("focused", "lines", "rows", "strips", "view", "width")

    def __init__(self) -> None:
        self.view: CardView | None = None
        self.width = 0
        self.focused = False
        self.lines: list[Text] = []
        self.rows: list[tuple[object, ...]] = []
        """What each of the card's rows shows (the key of its rendering)."""
        self.strips: dict[int, tuple[tuple[object, ...], Strip]] = {}


_Placed = tuple[tuple[int, int, int, int], _Card]


class GpuGrid(Widget, can_focus=True):
    BINDINGS = [*CARD_KEYS, Binding("m", "next_instance", "Next MIG instance", show=False)]

    ALLOW_SELECT = False  # a selection would run across cards: see CHANGELOG, docs/speed.md

    COMPONENT_CLASSES = {
        "gpu-grid--border",
        "gpu-grid--border-highlighted",
        "gpu-grid--border-selected",
        "gpu-grid--border-selected-highlighted",
        "gpu-grid--border-lost",
        "gpu-grid--title",
        "gpu-grid--title-highlighted",
        "gpu-grid--title-selected",
        "gpu-grid--title-selected-highlighted",
        "gpu-grid--title-focused",
        "gpu-grid--subtitle",
        "gpu-grid--subtitle-lost",
        "gpu-grid--compact-highlighted",
        "gpu-grid--border-highlighted-blurred",
        "gpu-grid--border-selected-highlighted-blurred",
        "gpu-grid--compact-highlighted-blurred",
    }
    """A card's border colour (``color``) by state; its title's and subtitle's colour,
    background and text style; a highlighted one-line card's background."""

    @mutable
    class SelectionChanged(Message):
        """The highlight or the selection moved; ``cards`` is what a launch would use:
        physical indices of whole GPUs and ``MIG-`` UUIDs of MIG instances."""

        highlighted: int | None
        cards: tuple[int | str, ...]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.auto_links = False  # no links here: spare Textual a scan of every line
        self._physical: list[int] = []
        self._position = 0
        self._selected: set[int | str] = set()
        self._mig_cursor: int | None = None
        """Position of the highlighted MIG instance in the highlighted card's list."""
        self._snapshot: Snapshot | None = None
        self._history: UtilizationHistory | None = None
        self._util_styles: dict[int, str] = {}
        """Each card's utilisation colour as last shown: it changes with hysteresis."""
        self.compact = False
        self.slurm_labels: dict[int, str] = {}
        self._cards: dict[int, _Card] = {}
        self._palette: Palette | None = None
        self._line_strips = LineStrips()
        self._joined: dict[int, tuple[tuple[Strip, ...], Strip]] = {}
        """Each screen line as last drawn, by the card strips it joins."""
        self._places: tuple[object, list[_Placed], list[list[_Placed]]] | None = None
        self._painting: tuple[Palette, int] | None = None
        """The palette and width of the paint under way (looked up once for its lines)."""

    # -- state -------------------------------------------------------------------------

    @property
    def highlighted(self) -> int | None:
        """The physical index of the highlighted card."""
        return self._physical[self._position] if self._physical else None

    @property
    def highlighted_target(self) -> int | str | None:
        """The highlighted card's physical index, or its highlighted MIG instance's UUID."""
        device = self._cursor_device()
        if device is not None and device.uuid:
            return device.uuid
        return self.highlighted

    @property
    def selection(self) -> tuple[int | str, ...]:
        """Selected cards and MIG instances in physical order, or the highlighted one."""
        if self._selected:
            return tuple(sorted(self._selected, key=self._place))
        target = self.highlighted_target
        return () if target is None else (target,)

    @property
    def explicitly_selected(self) -> frozenset[int | str]:
        return frozenset(self._selected)

    def toggle_highlighted(self) -> None:
        target = self.highlighted_target
        if target is None:
            return
        self._selected ^= {target}
        self._changed()

    def action_next_instance(self) -> None:
        """On a card in MIG mode: highlight its next MIG instance, then the card again."""
        gpu = self._highlighted_gpu()
        if gpu is None:
            return
        if not gpu.mig_devices:  # say why nothing happened
            mode = "has no MIG instances" if gpu.mig_mode_current else "is not in MIG mode"
            text = f"GPU {gpu.physical_index} {mode}: m highlights the MIG instances of a MIG card."
            self.app.notify(text)
            return
        following = 0 if self._mig_cursor is None else self._mig_cursor + 1
        self._mig_cursor = following if following < len(gpu.mig_devices) else None
        self._changed()

    def _highlighted_gpu(self) -> GpuSample | None:
        if self._snapshot is None or self.highlighted is None:
            return None
        return next((g for g in self._snapshot.gpus if g.physical_index == self.highlighted), None)

    def _cursor_device(self) -> MigDevice | None:
        gpu = self._highlighted_gpu()
        if gpu is None or self._mig_cursor is None or self._mig_cursor >= len(gpu.mig_devices):
            return None
        return gpu.mig_devices[self._mig_cursor]

    def _place(self, target: int | str) -> tuple[int, int]:
        """Sort key: a whole GPU at its index, a MIG instance after it, in NVML's order."""
        if isinstance(target, int):
            return (target, -1)
        for gpu in self._snapshot.gpus if self._snapshot is not None else ():
            for device in gpu.mig_devices:
                if device.uuid == target:
                    return (gpu.physical_index, device.mig_index)
        return (1 << 30, 0)

    def select_all(self) -> None:
        self._selected = set(self._physical)
        self._changed()

    def clear_selection(self) -> None:
        self._selected.clear()
        self._changed()

    def action_move(self, step: int) -> None:
        if self._physical:
            self._position = (self._position + step) % len(self._physical)
            self._mig_cursor = None
            self._changed()

    def action_move_row(self, step: int) -> None:
        if self._physical:
            columns = 1 if self.compact else self._columns()
            target = self._position + step * columns
            if 0 <= target < len(self._physical):
                self._position = target
                self._mig_cursor = None
                self._changed()

    # -- data ----------------------------------------------------------------------------

    def show_slurm(self, labels: Mapping[int, str]) -> None:
        """Which Slurm job holds each card (docs/slurm.md): shown in the cards' subtitles."""
        if dict(labels) != dict(self.slurm_labels):
            self.slurm_labels = dict(labels)
            if self._snapshot is not None:
                self._paint()

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
        self._selected = {t for t in self._selected if isinstance(t, str) or t in physical}
        self._mig_cursor = None
        self._cards = {index: _Card() for index in physical}
        self._joined.clear()
        self._layout()
        self.refresh()
        if first:
            self.call_after_refresh(self._changed)

    def _paint(self, focused: bool | None = None) -> None:
        """Show the latest views: repaint the screen lines whose cards' rows changed.
        ``focused``: whether the grid has the focus, where ``has_focus`` does not say yet."""
        if self._snapshot is None or self._history is None:
            return
        views = {id(card): view for card, view in self._views()}
        width = self.size.width
        if not width:  # not laid out yet: the first paint draws it all
            for card in self._cards.values():
                card.view = views.get(id(card), card.view)
            return
        changed: list[Region] = []
        focused = self._focus_shown() if focused is None else focused
        palette: Palette | None = None
        for (x, y, card_width, height), card in self._placement(width)[0]:
            view = views.get(id(card))
            if view is None:
                continue
            if view == card.view and card.width == card_width and card.focused == focused:
                continue  # a steady card sends nothing
            card.view, card.focused = view, focused
            rows = self._rows(card, card_width, focused)
            if card.width != card_width or len(rows) != len(card.rows):
                changed.append(Region(x, y, card_width, height))
                card.width, card.rows = card_width, rows
                continue
            moved = [
                row
                for row, (old, new) in enumerate(zip(card.rows, rows, strict=True))
                if old != new
            ]
            card.rows = rows
            palette = palette or self._current_palette()
            for row in moved:
                # Of a changed row, the terminal gets the cells from its first changed
                # segment to its last (the row is still painted whole).
                before = card.strips.get(row)
                after = self._card_row(card, row, card_width, palette)
                span = (0, card_width)
                if before is not None and before[0][1:] == (card_width, palette.key):
                    span = changed_span(before[1], after) or span
                changed.append(Region(x + span[0], y + row, span[1] - span[0], 1))
        if changed:
            self.refresh(*changed)

    def _views(self) -> list[tuple[_Card, CardView]]:
        """Each card's view of the latest sample (the sets its views were made from)."""
        assert self._snapshot is not None and self._history is not None
        shown: list[tuple[_Card, CardView]] = []
        for position, gpu in enumerate(self._snapshot.gpus):
            card = self._cards.get(gpu.physical_index)
            if card is None:
                continue
            highlighted = position == self._position
            util_style = sticky_level_style(
                gpu.utilization_gpu_percent, self._util_styles.get(gpu.physical_index)
            )
            self._util_styles[gpu.physical_index] = util_style
            view = CardView(
                gpu=gpu,
                history=self._history.series(gpu.uuid, gpu.physical_index),
                highlighted=highlighted,
                selected=gpu.physical_index in self._selected,
                compact=self.compact,
                mig_cursor=self._mig_cursor if highlighted else None,
                mig_selected=frozenset(
                    d.uuid for d in gpu.mig_devices if d.uuid and d.uuid in self._selected
                ),
                util_style=util_style,
                slurm=self.slurm_labels.get(gpu.physical_index),
                claim=card_claim_text(gpu, time.time()),
            )
            shown.append((card, view))
        return shown

    def _rows(self, card: _Card, width: int, focused: bool) -> list[tuple[object, ...]]:
        """The card's lines for ``width`` and what each of its rows shows (its key)."""
        view = card.view
        assert view is not None
        content_width = max(width - (2 if view.compact else 4), 10)
        _, card.lines, keys = _lines_for(view, content_width)
        if view.compact:
            return [("compact", keys[0], view.highlighted, focused)]
        border = border_kind(view, focused)
        title = (_title(view), title_kind(view), focused and view.highlighted)
        subtitle = (_subtitle(view, width - LABEL_CELLS_RESERVED), view.gpu.lost)
        rows: list[tuple[object, ...]] = [("top", border, title)]
        rows.extend(
            ("line", border, keys[line] if line < len(keys) else None)
            for line in range(CARD_HEIGHT - 2)
        )
        rows.append(("bottom", border, subtitle))
        return rows

    def _changed(self) -> None:
        self._paint()
        self.post_message(self.SelectionChanged(self.highlighted, self.selection))

    def _focus_shown(self) -> bool:
        """Whether the highlighted card shows that the keys reach it (the lab's cards: where
        the lab grid has the focus)."""
        return self.has_focus

    def on_focus(self) -> None:
        # The highlighted card shows where the keys go. Textual sets ``has_focus`` in its own
        # handler, which runs after this one: the new state is given.
        self._paint(focused=True)

    def on_blur(self) -> None:
        self._paint(focused=False)

    # -- layout --------------------------------------------------------------------------

    def on_resize(self) -> None:
        self._layout()
        self._joined.clear()
        self._paint()
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._palette = None

    def _columns(self, width: int | None = None) -> int:
        return columns_for(len(self._physical), width or self.size.width or self.app.size.width)

    def _height(self, count: int) -> int:
        return count if self.compact else math.ceil(count / self._columns()) * CARD_HEIGHT

    def _layout(self) -> None:
        height = self._height(max(len(self._physical), 1))
        if self.styles.height is None or self.styles.height.value != height:
            self.styles.height = height

    def _placement(self, width: int) -> tuple[list[_Placed], list[list[_Placed]]]:
        """The cards' places, and those of each band of rows (``grid_layout.place``)."""
        key = (width, self.compact, id(self._cards), len(self._cards))
        if self._places is None or self._places[0] != key:
            cards = [self._cards[index] for index in self._physical if index in self._cards]
            columns = 1 if self.compact else self._columns(width)
            self._places = (key, *place(cards, width, self.compact, columns, CARD_HEIGHT))
        return self._places[1], self._places[2]

    # -- drawing -------------------------------------------------------------------------

    def render_lines(self, crop: Region) -> list[Strip]:
        # The palette and the width are looked up once for every line of one paint: a
        # widget's size walks the DOM to the screen each time it is asked.
        self._painting = (self._current_palette(), self.size.width)
        try:
            return super().render_lines(crop)
        finally:
            self._painting = None

    def render_line(self, y: int) -> Strip:
        palette, width = self._painting or (self._current_palette(), self.size.width)
        strips: list[Strip] = []
        end = 0
        bands = self._placement(width)[1]
        band = y if self.compact else y // CARD_HEIGHT
        for (x, top, card_width, _), card in bands[band] if band < len(bands) else ():
            if card.view is not None and card.width != card_width:
                # laid out since the sample was shown (the first frame): its rows now, in
                # this frame, rather than in the one after
                card.focused = self._focus_shown()
                card.rows = self._rows(card, card_width, card.focused)
                card.width = card_width
            if card.view is not None and card.rows:
                if x > end:
                    strips.append(Strip.blank(x - end, palette.inner.rich_style))
                strips.append(self._card_row(card, y - top, card_width, palette))
                end = x + card_width
        if end < width:
            strips.append(Strip.blank(width - end, palette.inner.rich_style))
        key = tuple(strips)
        cached = self._joined.get(y)
        if (
            cached is not None
            and len(cached[0]) == len(key)
            and all(a is b for a, b in zip(cached[0], key, strict=True))
        ):
            return cached[1]
        joined = Strip.join(strips) if len(strips) != 1 else strips[0]
        self._joined[y] = (key, joined)
        return joined

    def _card_row(self, card: _Card, row: int, width: int, palette: Palette) -> Strip:
        shown = card.rows[row] if row < len(card.rows) else None
        key = (shown, width, palette.key)
        cached = card.strips.get(row)
        if cached is not None and cached[0] == key:
            return cached[1]
        assert card.view is not None
        label = shown[2] if shown is not None else None
        strip = draw_row(
            card.view, card.lines, label, row, width, palette, self._content, card.focused
        )
        card.strips[row] = (key, strip)
        return strip

    def _content(self, line: Text, width: int, text_style: VisualStyle, inner: RichStyle) -> Strip:
        strip = self._line_strips.strip(self, 0, line, max(width, 1), text_style)
        width = max(width, 0)
        length = strip.cell_length
        if length < width:  # padded as adjust_cell_length pads, without the cache it makes
            return Strip([*strip, Segment(" " * (width - length), inner)], width)
        return strip.adjust_cell_length(width, inner)

    def _current_palette(self) -> Palette:
        """The styles of a paint; made again when the theme, the background or the focus
        changed (a theme change comes as new component styles: ``notify_style_update``)."""
        base_background, background = self.background_colors
        visual_style = self.visual_style
        key = (self.app.theme, base_background, background, visual_style)
        if self._palette is not None and self._palette.key == key:
            return self._palette
        self._palette = make_palette(
            key,
            background,
            visual_style,
            lambda name: self.get_component_styles(f"gpu-grid--{name}"),
        )
        self._line_strips = LineStrips()
        return self._palette

    # -- reading what the cards show (tests, tools) ---------------------------------------

    @property
    def cards(self) -> tuple[int, ...]:
        """The physical indices of the cards shown, in their order."""
        return tuple(i for i in self._physical if self._cards[i].view is not None)

    def card_state(self, physical_index: int) -> CardState:
        """The card's state: lost, highlighted, selected, one line."""
        view = self._view_of(physical_index)
        return CardState(view.gpu.lost, view.highlighted, view.selected, view.compact)

    def card_content(self, physical_index: int) -> list[Text]:
        """The card's text lines (inside its border), with their styles."""
        self._view_of(physical_index)
        return [line.copy() for line in self._cards[physical_index].lines]

    def card_lines(self, physical_index: int) -> list[str]:
        """The card's rows as drawn, border included, in plain text."""
        self._view_of(physical_index)
        return [strip.text for strip in self.card_strips(physical_index)]

    def card_strips(self, physical_index: int) -> list[Strip]:
        """The card's rows as drawn (from the cache where they are in it)."""
        region = self.card_region(physical_index)  # where it is placed (KeyError: nowhere)
        card, palette = self._cards[physical_index], self._current_palette()
        return [self._card_row(card, row, region.width, palette) for row in range(region.height)]

    def subtitle(self, physical_index: int) -> str | None:
        """The card's bottom border text, fitted to its width (none on one-line cards)."""
        view = self._view_of(physical_index)
        if view.compact:
            return None
        region = self.card_region(physical_index)
        return _subtitle(view, region.width - LABEL_CELLS_RESERVED)

    def card_region(self, physical_index: int) -> Region:
        """Where the card is on the screen."""
        x0, y0 = self.content_region.offset
        for (x, y, width, height), card in self._placement(self.size.width)[0]:
            if card is self._cards.get(physical_index):
                return Region(x0 + x, y0 + y, width, height)
        raise KeyError(physical_index)

    def repaint_all(self) -> None:
        """Forget every drawn line and draw them again."""
        for card in self._cards.values():
            card.strips.clear()
        self._joined.clear()
        self._palette = None
        self.refresh()

    def _view_of(self, physical_index: int) -> CardView:
        view = self._cards[physical_index].view
        if view is None:
            raise KeyError(physical_index)
        return view

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self._height(len(self._physical)) if self._physical else 0
