"""A GPU card's frame as Textual drew a bordered card widget: its border (round, heavy when
selected), the title and subtitle in the border, the padding, and the styles of all of it
from the theme (the grid's component classes, gputop.tcss ``GpuGrid > .gpu-grid--*``).

``GpuGrid`` (gpu_grid.py) places the cards and keeps what each shows; this module draws one
row of one card from what it is given, and knows nothing of the grid.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.color import TRANSPARENT, Color
from textual.content import Content
from textual.css.styles import RenderStyles
from textual.strip import Strip
from textual.style import Style as VisualStyle

from gputop.core.records import frozen
from gputop.tui.widgets.gpu_card import LABEL_CELLS_RESERVED, CardView

CARD_HEIGHT = 8
"""A whole card, border included."""

ROUND = (("╭", "─", "╮"), ("│", " ", "│"), ("╰", "─", "╯"))
HEAVY = (("┏", "━", "┓"), ("┃", " ", "┃"), ("┗", "━", "┛"))

BORDERS = ("border", "border-highlighted", "border-selected", "border-selected-highlighted",
           "border-lost", "border-highlighted-blurred",
           "border-selected-highlighted-blurred")  # fmt: skip
LABELS = ("title", "title-highlighted", "title-selected", "title-selected-highlighted",
          "subtitle", "subtitle-lost")  # fmt: skip

ContentStrip = Callable[[Text, int, VisualStyle, RichStyle], Strip]
"""A card line as a strip of exactly that width, in the text style over the background."""


@frozen
class Palette:
    """The styles of one paint, from the theme through the grid's component classes."""

    key: tuple[object, ...]
    inner: VisualStyle
    """A card's background (the grid's)."""
    text: VisualStyle
    """A card's text (the widget's style)."""
    highlighted_text: VisualStyle
    """A one-line card's text, highlighted."""
    highlighted_inner: VisualStyle
    blurred_text: VisualStyle
    """A one-line card's text, highlighted while the grid has no focus."""
    blurred_inner: VisualStyle
    borders: dict[str, VisualStyle]
    """A card's border by state: its colour over the card's background."""
    labels: dict[tuple[str, bool], VisualStyle]
    """Title and subtitle styles by kind, and whether the grid has focus."""


def make_palette(
    key: tuple[object, ...],
    background: Color,
    visual_style: VisualStyle,
    component: Callable[[str], RenderStyles],
) -> Palette:
    """The styles of a paint: ``component(name)`` gives the styles of ``gpu-grid--name``."""
    inner = VisualStyle(background=background)
    highlighted_background = background + component("compact-highlighted").background
    blurred_background = background + component("compact-highlighted-blurred").background
    borders = {
        name: inner + VisualStyle(foreground=background + component(name).color) for name in BORDERS
    }
    labels: dict[tuple[str, bool], VisualStyle] = {}
    focused_background = component("title-focused").background
    for name in LABELS:
        styles = component(name)
        for focused in (False, True):
            label_background = focused_background if focused else TRANSPARENT
            labels[(name, focused)] = VisualStyle.from_rich_style(
                RichStyle(bold=True) if styles.text_style.bold else RichStyle()
            ) + VisualStyle(
                (background + label_background) if label_background.a else TRANSPARENT,
                (background + styles.color) if styles.color.a else TRANSPARENT,
            )

    def text_on(on: Color) -> VisualStyle:
        text = visual_style
        return VisualStyle(on, text.foreground, bold=text.bold, dim=text.dim, italic=text.italic)

    return Palette(
        key=key,
        inner=inner,
        text=visual_style,
        highlighted_text=text_on(highlighted_background),
        highlighted_inner=VisualStyle(background=highlighted_background),
        blurred_text=text_on(blurred_background),
        blurred_inner=VisualStyle(background=blurred_background),
        borders=borders,
        labels=labels,
    )


def draw_row(
    view: CardView,
    lines: list[Text],
    label: object,
    row: int,
    width: int,
    palette: Palette,
    content: ContentStrip,
    focused: bool = True,
) -> Strip:
    """Row ``row`` of a card (``label``: the title or subtitle its rows record for the top
    and bottom rows), as Textual drew a card widget (StylesCache's rows). ``focused``: the
    grid has the focus, and its highlighted card shows it in full colour."""
    if view.compact:
        text_style, inner_style = palette.text, palette.inner
        if view.highlighted:
            text_style = palette.highlighted_text if focused else palette.blurred_text
            inner_style = palette.highlighted_inner if focused else palette.blurred_inner
        inner = inner_style.rich_style
        line = content(lines[0], width - 2, text_style, inner)
        return Strip.join([Strip.blank(1, inner), line, Strip.blank(1, inner)])
    inner = palette.inner.rich_style
    border = palette.borders[border_kind(view, focused)]
    border_style = border.rich_style
    box = HEAVY if view.selected and not view.gpu.lost else ROUND
    if row in (0, CARD_HEIGHT - 1):
        top = row == 0
        corner_left, edge, corner_right = box[0 if top else 2]
        assert isinstance(label, tuple)
        text = label[0]
        if top:
            style = palette.labels[(label[1], label[2])]
        else:
            style = palette.labels[("subtitle-lost" if label[1] else "subtitle", False)]
        return border_row(corner_left, edge, corner_right, width, border, text, style, top)
    left, _, right = box[1]
    line_index = row - 1
    if line_index < len(lines):
        inside = content(lines[line_index], width - 4, palette.text, inner)
    else:
        inside = Strip.blank(width - 4, palette.text.rich_style)
    return Strip(
        [
            Segment(left, border_style),
            Segment(" ", inner),
            *inside,
            Segment(" ", inner),
            Segment(right, border_style),
        ],
        width,
    )


def border_kind(view: CardView, focused: bool = True) -> str:
    """The border's colour by the card's state; the highlighted card's in full colour only
    while the grid has the focus, so that the one panel in the accent colour is the one the
    keys reach (the process table's and the jobs' borders say the same)."""
    if view.gpu.lost:
        return "border-lost"
    blurred = "" if focused else "-blurred"
    if view.selected:
        return f"border-selected-highlighted{blurred}" if view.highlighted else "border-selected"
    return f"border-highlighted{blurred}" if view.highlighted else "border"


def title_kind(view: CardView) -> str:
    if view.selected:
        return "title-selected-highlighted" if view.highlighted else "title-selected"
    return "title-highlighted" if view.highlighted else "title"


def border_row(
    corner_left: str,
    edge: str,
    corner_right: str,
    width: int,
    border: VisualStyle,
    text: object,
    label_style: VisualStyle,
    left_aligned: bool,
) -> Strip:
    """A card's top or bottom border with its label, as Textual draws a border title
    (``_border.render_border_label``, ``render_row``): cut with an ellipsis to the width
    less the corners and a blank each side, in the label's style over the border's."""
    label: list[Segment] = []
    border_style = border.rich_style
    if isinstance(text, str) and text and width - 2 > 4:
        content = Content(text).truncate(width - LABEL_CELLS_RESERVED, ellipsis=True)
        content = content.pad_left(1).pad_right(1).stylize_before(label_style)
        label = content.render_segments(border)
    length = sum(segment.cell_length for segment in label)
    space = max(0, width - 2 - length)
    segments = [Segment(corner_left, border_style)]
    if not space:
        segments.extend(label)
    elif not length:
        segments.append(Segment(edge * space, border_style))
    elif left_aligned:
        segments.extend([Segment(edge, border_style), *label])
        segments.append(Segment(edge * (space - 1), border_style))
    else:
        segments.append(Segment(edge * (space - 1), border_style))
        segments.extend([*label, Segment(edge, border_style)])
    segments.append(Segment(corner_right, border_style))
    return Strip(segments, width)
