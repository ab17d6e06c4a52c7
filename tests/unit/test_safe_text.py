"""The one sanitiser: no character a terminal obeys survives, readable text does."""

from __future__ import annotations

import functools
import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from gputop.core.safe_text import (
    clean,
    clean_argv,
    clean_keeping_colours,
    clean_lines,
    split_unfinished_sgr,
)

TERMINAL_ACTS_ON = {chr(c) for c in range(0x20)} | {chr(c) for c in range(0x7F, 0xA0)}


def test_escape_sequences_become_visible_text():
    assert clean("\x1b]52;c;aGk=\x07x") == "\\e]52;c;aGk=\\x07x"
    assert clean("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert clean("\x9b2J") == "\\x9b2J"


def test_bidi_overrides_and_invisible_characters_are_shown():
    assert clean("evil\u202etxt.exe") == "evil\\u202etxt.exe"
    assert clean("a\u200bb") == "a\\u200bb"


def test_undecodable_bytes_are_shown_as_bytes_and_encode():
    raw = b"train\xff.py".decode("utf-8", "surrogateescape")
    assert clean(raw) == "train\\xff.py"
    clean(raw).encode("utf-8")


def test_readable_text_is_kept():
    for text in ("python train.py --lr=3e-4", "训练 🚀", "exp[/]1", "café"):
        assert clean(text) == text


def test_argv_is_joined_after_cleaning():
    assert clean_argv(["sleep", "6\n0"]) == "sleep 6\\n0"


@given(st.text())
def test_no_control_character_survives(text):
    out = clean(text)
    assert not (set(out) & TERMINAL_ACTS_ON)
    out.encode("utf-8")


def test_clean_lines_keeps_the_line_breaks_of_a_message_only() -> None:
    assert clean_lines("first\nsecond \x1b]0;t\x07") == "first\nsecond \\e]0;t\\x07"


def test_colours_and_line_control_are_kept_when_asked() -> None:
    text = "\x1b[1;31mred\x1b[0m\r\n\t\b \x1b]52;c;x\x07 \x1b[2J \x1b[H"
    assert clean_keeping_colours(text) == (
        "\x1b[1;31mred\x1b[0m\r\n\t\b \\e]52;c;x\\x07 \\e[2J \\e[H"
    )
    assert clean_keeping_colours("a\r\nb", keep="\t") == "a\\r\\nb"


def test_an_unfinished_colour_sequence_at_the_end_is_split_off() -> None:
    assert split_unfinished_sgr("ok\x1b[1;3") == ("ok", "\x1b[1;3")
    assert split_unfinished_sgr("ok\x1b") == ("ok", "\x1b")
    assert split_unfinished_sgr("ok\x1b[1m") == ("ok\x1b[1m", "")
    assert split_unfinished_sgr("ok\x1b]0") == ("ok\x1b]0", "")


SGR = re.compile("\x1b\\[[0-9;:]*m")


@given(st.text())
def test_only_colour_sequences_and_line_control_survive_in_a_log(text: str) -> None:
    out = SGR.sub("", clean_keeping_colours(text))
    assert not (set(out) & (TERMINAL_ACTS_ON - set("\n\r\t\b")))


# Invisible characters (issue 40): every one a terminal draws as nothing is shown -----------

# Default_Ignorable_Code_Point, from Unicode's DerivedCoreProperties.txt (Python's
# unicodedata does not carry the property).
DEFAULT_IGNORABLE = [
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
]
PRESENTATION = {"\ufe0e", "\ufe0f"}


@functools.cache
def invisible() -> frozenset[str]:
    """Every character to be shown as an escape, from Python's Unicode tables (worked out
    when first needed, not when the file is collected)."""
    found = {chr(c) for first, last in DEFAULT_IGNORABLE for c in range(first, last + 1)}
    for code in range(0x110000):
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            found.add(chr(code))
    return frozenset(found)


def test_the_characters_issue_40_found_are_shown() -> None:
    assert clean("a\u2060b") == "a\\u2060b"  # word joiner
    assert clean("pass\u00adword") == "pass\\xadword"  # soft hyphen
    assert clean("m\u180eo") == "m\\u180eo"  # Mongolian vowel separator
    assert clean("\u3164") == "\\u3164"  # Hangul filler: a name that looks empty
    assert clean("\u115f\u1160\uffa0\u034f") == "\\u115f\\u1160\\uffa0\\u034f"
    # tag characters spell a hidden "hi" after a visible word
    assert clean("ok\U000e0068\U000e0069") == "ok\\U000e0068\\U000e0069"
    assert clean("x\U000e0100") == "x\\U000e0100"  # a variation selector of the supplement


def test_every_format_control_and_default_ignorable_character_is_shown() -> None:
    """All of them, against this Python's Unicode tables: alone, after a letter, in a run."""
    for char in sorted(invisible()):
        for text in (char, "a" + char, "a" + char + char):
            out = clean(text)
            left = [c for c in out if c == char]
            if char in PRESENTATION and text != char:
                assert left == [char], (hex(ord(char)), text)  # one after a visible character
            else:
                assert left == [], (hex(ord(char)), text)
            assert out.isprintable() or char in PRESENTATION, hex(ord(char))


def test_an_emoji_keeps_its_presentation_selector_but_not_a_run_of_them() -> None:
    assert clean("\u2764\ufe0f ok") == "\u2764\ufe0f ok"
    assert clean("\u2764\ufe0f\ufe0f") == "\u2764\ufe0f\\ufe0f"
    assert clean("\ufe0fx") == "\\ufe0fx"
    assert clean("a\u200b\ufe0f") == "a\\u200b\\ufe0f"
    assert clean("\u2003\ufe0f") == "\u2003\\ufe0f"  # after a blank: nothing to present


@given(st.text())
def test_no_invisible_character_survives(text: str) -> None:
    out = clean(text)
    assert not (set(out) & (invisible() - PRESENTATION))
    for position, char in enumerate(out):
        if char in PRESENTATION:  # only ever one, right after a visible character
            assert position > 0 and out[position - 1] not in PRESENTATION
            assert not out[position - 1].isspace()
    assert clean(out) == out
