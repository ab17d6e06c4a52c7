"""The one sanitiser: no character a terminal obeys survives, readable text does."""

from __future__ import annotations

import re

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
