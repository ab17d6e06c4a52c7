"""The one sanitiser: no character a terminal obeys survives, readable text does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gputop.core.safe_text import clean, clean_argv

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
