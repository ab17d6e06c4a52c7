"""The truecolor filter that asks once a style (gputop/tui/textual_compat/paint.py) gives
every line exactly what Textual's own ``ANSIToTruecolor.apply`` gives it."""

from __future__ import annotations

import itertools

import pytest
from rich.segment import ControlType, Segment
from rich.style import Style
from rich.terminal_theme import MONOKAI, SVG_EXPORT_THEME
from textual.color import Color
from textual.filter import ANSIToTruecolor

from gputop.tui.textual_compat import paint

STYLES = [
    None,
    Style(),
    Style(color="red"),
    Style(color="color(6)", bgcolor="blue"),
    Style(color="#e0e0e0", dim=True),
    Style(color="bright_green", dim=True, bold=True),
    Style(color="color(200)"),
    Style(color="#102030", bgcolor="#405060"),
    Style(bgcolor="yellow"),
    Style(dim=True),
    Style(bold=True, underline=True),
    Style(color="default", bgcolor="default"),
]
BACKGROUNDS = [Color(0, 0, 0), Color(30, 30, 40), Color.parse("#e0e0e0")]


def _lines() -> list[list[Segment]]:
    """Lines of every style, in runs, alone, with control segments and empty."""
    lines: list[list[Segment]] = [[]]
    lines += [[Segment(f"s{i}", style)] for i, style in enumerate(STYLES)]
    lines += [[Segment(a, style) for a in "abc"] for style in STYLES]
    for first, second in itertools.permutations(STYLES[:6], 2):
        lines.append([Segment("x", first), Segment("yy", second), Segment("z", first)])
    lines.append([Segment("p", Style(color="#ffffff")), Segment("", None, [(ControlType.HOME,)])])
    lines.append([Segment("q", Style(color="red"), [(ControlType.BELL,)]), Segment("r")])
    return lines


def _both(theme: object) -> tuple[ANSIToTruecolor, ANSIToTruecolor]:
    return ANSIToTruecolor(theme), ANSIToTruecolor(theme)  # type: ignore[arg-type]


@pytest.mark.parametrize("theme", [MONOKAI, SVG_EXPORT_THEME], ids=["monokai", "svg"])
def test_each_line_is_what_textuals_filter_makes_of_it(theme: object) -> None:
    textual, lean = _both(theme)
    for _ in range(3):  # the first pass asks, the next ones find the answers kept
        for background in BACKGROUNDS:
            for line in _lines():
                expected = paint._textual_truecolor_apply(textual, list(line), background)
                got = paint._lean_truecolor_apply(lean, list(line), background)
                assert [tuple(s) for s in got] == [tuple(s) for s in expected], (line, background)


def test_a_line_no_style_of_which_changes_is_handed_back_itself() -> None:
    _, lean = _both(MONOKAI)
    line = [Segment("a", Style(color="#112233")), Segment("b", None), Segment("c", Style())]
    assert paint._lean_truecolor_apply(lean, line, BACKGROUNDS[0]) is line
    changed = [Segment("a", Style(color="#112233")), Segment("b", Style(color="red"))]
    got = paint._lean_truecolor_apply(lean, changed, BACKGROUNDS[0])
    assert got is not changed and got[0] is changed[0]
    assert got[1].style is not None and got[1].style.color is not None
    assert got[1].style.color.triplet is not None  # red as the theme's truecolor


def test_answers_are_forgotten_past_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paint, "_LEAN_FILTER_STYLES", 8)
    textual, lean = _both(MONOKAI)
    background = BACKGROUNDS[1]
    for number in range(64):
        line = [Segment("n", Style(color=f"color({number})", dim=number % 2 == 0))]
        expected = paint._textual_truecolor_apply(textual, list(line), background)
        assert paint._lean_truecolor_apply(lean, line, background) == expected
        assert len(lean.__dict__["_lean_answers"][background]) <= 9


def test_a_new_theme_is_a_new_filter_whose_answers_are_its_own() -> None:
    """``App._refresh_truecolor_filter`` makes a new filter for a new theme: the answers one
    filter kept never colour another's lines."""
    first, second = ANSIToTruecolor(MONOKAI), ANSIToTruecolor(SVG_EXPORT_THEME)
    line = [Segment("r", Style(color="red"))]
    a = paint._lean_truecolor_apply(first, list(line), BACKGROUNDS[0])
    b = paint._lean_truecolor_apply(second, list(line), BACKGROUNDS[0])
    assert a[0].style != b[0].style
    own = ANSIToTruecolor(SVG_EXPORT_THEME)
    assert b == paint._textual_truecolor_apply(own, line, BACKGROUNDS[0])


def test_installing_it_replaces_textuals_apply_once() -> None:
    paint.install_lean_filter()
    paint.install_lean_filter()
    assert ANSIToTruecolor.apply is paint._lean_truecolor_apply
