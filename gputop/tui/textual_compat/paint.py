"""How gputop paints faster than Textual's own steps, through Textual's internals: a
widget's text rendered as Textual renders it, the partial screen update, strips without
their caches, a widget's lines styled once a paint, and colours made truecolor once a
style. Part of textual_compat (its
``__init__`` says why these live here); tests/tui/test_textual_compat.py checks each
against Textual's own output.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

from rich.cells import cell_len
from rich.color import ColorSystem
from rich.segment import Segment
from rich.text import Text
from textual import _styles_cache
from textual._compositor import ChopsUpdate, Compositor
from textual.cache import FIFOCache
from textual.filter import ANSIToTruecolor
from textual.geometry import Region
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual, visualize
from textual.widget import Widget

# -- A widget's text as Textual renders it (gputop/tui/widgets/gpu_card.py) ------------------


def visual_strips(
    widget: Widget, text: Text, width: int, height: int, style: VisualStyle
) -> list[Strip]:
    """``text`` as ``widget`` renders its content, line by line: the strips
    ``Widget.render_lines`` gives for it (``textual.visual``: ``visualize`` and
    ``Visual.to_strips`` are how a widget renders what ``render`` returns)."""
    return Visual.to_strips(widget, visualize(widget, text), width, height, style)


# -- A partial screen update (docs/speed.md, "Third round") -----------------------------------
#
# For each frame Textual's compositor (``Compositor.render_partial_update``) asks every widget
# that overlaps the bounding box of the changed regions for all its lines, the containers and
# the screen behind them too, and cuts each of those lines at every widget edge; it then writes
# only the pieces ("chops", keyed by the cut they start at) that overlap a changed span of each
# line (``ChopsUpdate``). The front widget's piece of a cut wins (``_render_chops``: widgets
# come front to back, ``visible_widgets``). ``_render_partial_update`` makes the same update
# asking only the widgets, and only the lines, whose pieces are written: the pieces it writes
# are the ones Textual's own would write (tests/tui/test_textual_compat.py compares the two
# updates, byte for byte), and a widget not asked keeps its changed lines for the next time
# they are shown (``StylesCache`` renders a line that changed when next asked for it).


def install_partial_updates() -> None:
    """Make every screen's partial updates ask only for what they write (idempotent)."""
    if Compositor.render_partial_update is not _render_partial_update:
        Compositor.render_partial_update = _render_partial_update  # type: ignore[method-assign]


_textual_partial_update = Compositor.render_partial_update
"""Textual's own, for the test that compares the two."""


def _render_partial_update(self: Compositor) -> ChopsUpdate | None:
    update_regions = self._dirty_regions.copy()
    self._dirty_regions.clear()
    if not update_regions:
        return None
    crop = Region.from_union(update_regions).intersection(self.size.region)
    spans = list(self._regions_to_spans(update_regions))
    cuts = self.cuts
    chops = _written_chops(self, crop, spans, cuts)
    return _SpansUpdate(chops, spans, [cut_set[1:] for cut_set in cuts])


class _SpansUpdate(ChopsUpdate):
    """Textual's update, writing of each piece only what a changed span covers.

    Textual's (``ChopsUpdate.render_segments``) writes a piece from its start (the left
    edge of its widget) to the span's end: a cell changed at the right of a card or a table
    row sends the whole line up to it, and a line of four changed cards sends its start four
    times. This one starts at the piece's first segment that reaches into the span (never
    inside a segment, so never half of a wide character), as Textual's own renderable
    (``__rich_console__``) does, and stops where Textual's does. The cells it leaves out lie
    outside every changed span: the terminal shows them already.
    """

    def render_segments(self, console: Any) -> str:
        sequences: list[str] = []
        append = sequences.append
        chops = self.chops
        chop_ends = self.chop_ends
        last_y = self.spans[-1][0]
        color_system = console._color_system or ColorSystem.TRUECOLOR
        for y, x1, x2 in self.spans:
            for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
                if strip is None or x > x2 or end <= x1:
                    continue
                if x >= x1 and end <= x2:  # all of the piece: as Textual writes it
                    append(f"\x1b[{y + 1};{x + 1}H")
                    append(strip.render(console))
                    continue
                written = _span_of(strip, x, x1, min(end, x2), color_system)
                if written is None:  # a wide character across the end: as Textual cuts it
                    skip = _segment_start(strip, x, x1)
                    append(f"\x1b[{y + 1};{x + skip + 1}H")
                    append(strip.crop(skip, min(end, x2) - x).render(console))
                else:
                    append(f"\x1b[{y + 1};{written[0] + 1}H")
                    append(written[1])
            if y != last_y:
                append("\n")
        return "".join(sequences)


def _segment_start(strip: Strip, x: int, x1: int) -> int:
    """Where (from the piece's start ``x``) its first segment reaching ``x1`` starts."""
    skip = 0
    for segment in strip:
        width = segment.cell_length
        if x + skip + width > x1:
            break
        skip += width
    return skip


def _span_of(
    strip: Strip, x: int, x1: int, x2: int, color_system: ColorSystem
) -> tuple[int, str] | None:
    """The piece ``strip`` (at column ``x``) written from its first segment reaching ``x1``
    up to ``x2``: the column it starts at and its text with its styles, as
    ``Strip.render`` makes it, without cropping a new strip. None where ``x2`` falls inside
    a segment of wide characters."""
    render = Strip.render_style
    parts: list[str] = []
    start = -1
    position = x
    for text, style, _ in strip:
        width = len(text) if text.isascii() else cell_len(text)
        after = position + width
        if after <= x1:
            position = after
            continue
        if position >= x2:
            break
        if start < 0:
            start = position
        if after > x2:
            if not text.isascii():
                return None
            text = text[: x2 - position]
        parts.append(text if style is None else render(style, text, color_system=color_system))
        position = after
    return (max(start, x), "".join(parts))


def _written_chops(
    compositor: Compositor,
    crop: Region,
    spans: list[tuple[int, int, int]],
    cuts: list[list[int]],
) -> list[dict[int, Strip | None]]:
    chops: list[dict[int, Strip | None]] = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
    # The cuts whose piece overlaps a changed span, and that no widget in front has filled
    # yet: line -> cuts. (ChopsUpdate also moves the cursor to a piece that starts where a
    # span ends, x == x2, and writes nothing of it: left out here, as nothing shows.)
    wanted: dict[int, set[int]] = {}
    for y, x1, x2 in spans:
        cut_set = cuts[y]
        for x, end in itertools.pairwise(cut_set):
            if x < x2 and end > x1:
                wanted.setdefault(y, set()).add(x)
    overlaps = crop.overlaps
    for widget, (region, clip) in compositor.visible_widgets.items():
        if not wanted:
            break
        if not overlaps(clip):
            continue
        render_region = region.intersection(clip)
        if not render_region.width or not render_region.height:
            continue
        first_cut, last_cut = render_region.column_span
        top, bottom = render_region.line_span
        lines = [
            y
            for y, left in wanted.items()
            if top <= y < bottom and any(first_cut <= x < last_cut for x in left)
        ]
        if not lines:
            continue
        low, high = min(lines), max(lines)
        strips = widget.render_lines(
            Region(
                render_region.x - region.x,
                low - region.y,
                render_region.width,
                high - low + 1,
            )
        )
        render_x = render_region.x
        for y in lines:
            strip = strips[y - low]
            chops_line = chops[y]
            final_cuts = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
            left = wanted[y]
            pieces = strip.divide([cut - render_x for cut in final_cuts[1:]])
            for cut, piece in zip(final_cuts, pieces, strict=False):  # as Textual's
                if chops_line.get(cut) is None:
                    chops_line[cut] = piece
                    left.discard(cut)
            if not left:
                del wanted[y]
    return chops


# -- Strips made without their caches ----------------------------------------------------------
#
# ``Strip.__init__`` makes seven ``FIFOCache``s (crop, divide, style, filter, line length,
# crop-extend, offsets), each with its dict, for every strip: on a busy frame about 300 strips,
# 4,500 objects for the garbage collector, although most strips are rendered once and never
# cropped, divided or filtered. ``install_lean_strips`` makes each cache when first asked for:
# the seven slots (``Strip.__slots__``) become properties over the slots' own descriptors, and
# ``__init__`` leaves them empty. Every method of Textual's that uses a cache reads it through
# ``self._<name>_cache`` and so gets it made then; what a strip renders is unchanged
# (tests/tui/test_textual_compat.py: the same strips' operations, cached and not).

_STRIP_CACHES = {
    "_divide_cache": 4,
    "_crop_cache": 16,
    "_style_cache": 16,
    "_filter_cache": 4,
    "_line_length_cache": 4,
    "_crop_extend_cache": 4,
    "_offsets_cache": 4,
}
"""Each cache ``Strip.__init__`` makes and its size (Textual 8.2)."""
_STRIP_SLOTS = {name: Strip.__dict__[name] for name in _STRIP_CACHES}
"""The slots' own descriptors, which the properties read and write."""
_textual_strip_init = Strip.__init__


def install_lean_strips() -> None:
    """Make each strip's caches when first used (idempotent)."""
    if Strip.__init__ is _lean_strip_init:
        return
    for name, size in _STRIP_CACHES.items():
        slot = _STRIP_SLOTS[name]
        setattr(Strip, name, property(_lazy_cache(slot, size), slot.__set__))
    Strip.__init__ = _lean_strip_init  # type: ignore[method-assign]


def _lazy_cache(slot: Any, size: int) -> Any:
    def cache(strip: Strip) -> FIFOCache[Any, Any]:
        try:
            return slot.__get__(strip, Strip)
        except AttributeError:  # not made yet
            made: FIFOCache[Any, Any] = FIFOCache(size)
            slot.__set__(strip, made)
            return made

    return cache


def _lean_strip_init(
    self: Strip, segments: Iterable[Segment], cell_length: int | None = None
) -> None:
    self._segments = list(segments)
    self._cell_length = cell_length
    self._render_cache = None
    self._link_ids = None
    self._cell_count = None


# -- A widget's lines styled once a paint -----------------------------------------------------
#
# ``StylesCache.render`` (``textual._styles_cache``) styles each line a widget paints through
# ``StylesCache.render_line``, which reads the widget's styles again for every line (its
# gutter, border and outline, each a tuple made from the rules; hatch, tint and text
# opacity) and makes the left and right border's styles and segments anew: on the busy
# server most of the process table's 35 lines and a dozen card lines each second, for the
# same styles every time. ``install_lean_styles`` reads them once for each ``render`` (a
# paint: the styles do not change during one) and draws a content line with the same steps
# as Textual's branch for it, where nothing but a border and padding apply (no outline,
# hatch, tint, opacity or text opacity); any other line (a border's top or bottom row, a
# padding row) and any other widget go through Textual's own ``render_line``
# (tests/tui/test_textual_compat.py compares both, strip by strip).

_textual_styles_render = _styles_cache.StylesCache.render
_textual_styles_render_line = _styles_cache.StylesCache.render_line


def install_lean_styles() -> None:
    """Style a paint's content lines from its styles read once (idempotent)."""
    cache = _styles_cache.StylesCache
    if cache.render is not _lean_styles_render:
        cache.render = _lean_styles_render  # type: ignore[method-assign]
        cache.render_line = _lean_styles_render_line  # type: ignore[method-assign,assignment]


def _lean_styles_render(self: Any, *args: Any, **kwargs: Any) -> list[Strip]:
    self._lean_frame = None  # read again for this paint, when its first line is drawn
    try:
        return _textual_styles_render(self, *args, **kwargs)
    finally:
        self._lean_frame = None


_LeanFrame = tuple[int, int, int, int, int, int, int, int, Any, Any, Any]
"""What a paint's content lines share: the rows between Textual's own (a border's top and
bottom, the padding's), the gutter's top, the content's size, the padding's left and right,
the width, the lines' background, the left and right border's segments (None without)."""


def _lean_frame(
    args: tuple[Any, ...], inner_outer: Callable[[Any, Any], tuple[VisualStyle, VisualStyle]]
) -> _LeanFrame | None:
    """What every content line of one paint shares, read as Textual's ``render_line`` reads
    it (``args``: ``render_line``'s); None where a line needs more than a border and padding
    (Textual's own then)."""
    styles, _, size, content_size, padding, base_background, background = args[:7]
    opacity = args[10]
    outline = styles.outline
    if any(edge for edge, _ in outline) or opacity != 1.0:
        return None
    if styles.text_opacity != 1.0 or styles.tint.a:
        return None
    if styles.has_rule("hatch") and styles.hatch != "none":
        return None
    gutter = styles.gutter
    width, height = size
    content_width, content_height = content_size
    pad_top, pad_right, pad_bottom, pad_left = padding
    (
        (border_top, _),
        (border_right, border_right_color),
        (border_bottom, _),
        (border_left, border_left_color),
    ) = styles.border
    inner, outer = inner_outer(base_background, background)
    left = right = None
    if border_left or border_right:
        style = _styles_cache.Style
        left_style = style(foreground=base_background + border_left_color.multiply_alpha(opacity))
        left = _styles_cache.get_box(border_left, inner, outer, left_style)[1][0]
        right_style = style(foreground=base_background + border_right_color.multiply_alpha(opacity))
        right = _styles_cache.get_box(border_right, inner, outer, right_style)[1][2]
        if not border_left:
            left = None
        if not border_right:
            right = None
    # The rows Textual draws itself: a border's top and bottom, and the padding's rows.
    first = gutter.top if pad_top else (1 if border_top else 0)
    last = height - gutter.bottom if pad_bottom else (height - 1 if border_bottom else height)
    return (
        first,
        last,
        gutter.top,
        content_width,
        content_height,
        pad_left,
        pad_right,
        width,
        inner.rich_style,
        left,
        right,
    )


def _lean_styles_render_line(self: Any, *args: Any) -> Strip:
    # Textual's arguments, as StylesCache.render passes them (by position): styles, y, size,
    # content_size, padding, base_background, background, render_content_line, the border's
    # title and subtitle, opacity, ansi_theme, native_ansi.
    y = args[1]
    frame = getattr(self, "_lean_frame", None)
    if frame is None:  # () : none of this paint's lines is lean
        frame = self._lean_frame = _lean_frame(args, self.get_inner_outer) or ()
    if not frame or not frame[0] <= y < frame[1]:
        return _textual_styles_render_line(self, *args)
    render_content_line: Callable[[int], Strip] = args[7]
    _, _, top, content_width, content_height, pad_left, pad_right, width, inner, left, right = frame
    # Textual's branch C (content with border and padding), its post-processing a no-op here.
    content_y = y - top
    line: Iterable[Segment]
    if content_y < content_height:
        line = render_content_line(content_y).adjust_cell_length(content_width, inner)
    else:
        line = Strip.blank(content_width, inner)
    if pad_left or pad_right:
        line = _styles_cache.line_pad(line, pad_left, pad_right, inner)
    if left is not None and right is not None:
        line = [left, *line, right]
    elif left is not None:
        line = [left, *line]
    elif right is not None:
        line = [*line, right]
    return Strip(line, width)


# -- Colours made truecolor once a style ---------------------------------------------------
#
# Textual's ``ANSIToTruecolor`` filter (``textual.filter``) runs over every segment of every
# line a widget paints, after ``StylesCache`` styles it: a colour named by its ANSI number
# becomes the theme's truecolor and a dim style a blended colour. It makes a new segment for
# each, the same ones for most, and asks its ``truecolor_style`` (an ``lru_cache``: a key
# tuple and three hashes) each time: on the busy server about 600 segments a second, 8 % of
# the main thread's instructions for a busy sample. ``install_lean_filter`` gives it an
# ``apply`` that keeps each style's answer for a background (a dict on the filter, cleared
# past ``_LEAN_FILTER_STYLES``) and hands back the line's own segments where none changes;
# a segment it changes is the one Textual's would make (tests/tui/test_lean_filter.py
# compares both, segment by segment). A new theme is a new filter (``App``'s
# ``_refresh_truecolor_filter``), so a kept answer never outlives its theme.

_textual_truecolor_apply = ANSIToTruecolor.apply
_LEAN_FILTER_STYLES = 4096
"""Styles whose answers one filter keeps; past this they are forgotten and asked again."""


def install_lean_filter() -> None:
    """Make the truecolor filter ask once a style and background (idempotent)."""
    if ANSIToTruecolor.apply is not _lean_truecolor_apply:
        ANSIToTruecolor.apply = _lean_truecolor_apply  # type: ignore[method-assign]


def _lean_truecolor_apply(
    self: ANSIToTruecolor, segments: list[Segment], background: Any
) -> list[Segment]:
    answers: dict[Any, dict[Any, Any]] = self.__dict__.setdefault("_lean_answers", {})
    known = answers.get(background)
    if known is None or len(known) > _LEAN_FILTER_STYLES:
        known = answers[background] = {}
    ask, rich_background = self.truecolor_style, background.rich_color
    changed: list[Segment] | None = None
    for index, segment in enumerate(segments):
        text, style, control = segment
        new = _SAME
        if style is not None:
            new = known.get(style)
            if new is None:  # an equal style keeps its segment, whichever object it is
                answer = ask(style, rich_background)
                new = known[style] = _SAME if answer == style else answer
        if new is _SAME and control is None:
            if changed is not None:
                changed.append(segment)
        else:  # as Textual's: its style made truecolor, no control codes
            if changed is None:
                changed = segments[:index]
            changed.append(Segment(text, style if new is _SAME else new, None))
    return segments if changed is None else changed


_SAME: Any = object()
"""A kept answer: the style is already what the filter makes of it."""
