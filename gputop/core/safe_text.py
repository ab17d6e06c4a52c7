"""The one sanitiser for text that comes from outside gputop.

Command lines, user names, job names, log lines, scenario strings and host names can hold
what a terminal obeys (ESC sequences such as OSC 0 and OSC 52, newlines that forge rows,
bidirectional overrides). Every such string passes :func:`clean` before it reaches a
terminal, in every output, and is then drawn as plain text, never parsed as markup. Control
characters become visible escapes (``\\x1b``, ``\\n``): a person sees that something odd is
there, and the terminal is never told to do anything (docs/security.md).
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}

# C0 controls, DEL, C1 controls; surrogates (undecodable bytes kept by surrogateescape);
# Unicode line and paragraph separators; and every character a terminal draws as nothing,
# which can hide text, reorder it or carry a hidden one: the format characters (Unicode
# category Cf: the soft hyphen U+00AD, U+180E, zero-width characters U+200B-U+200F, the
# bidirectional embeddings, overrides and isolates, the word joiner and invisible operators
# U+2060-U+206F, U+FEFF, the interlinear annotation marks, the tag characters U+E0000-
# U+E007F that can spell a hidden text after a visible one) and the other default-ignorable
# code points (the combining grapheme joiner U+034F, the Hangul fillers U+115F, U+1160,
# U+3164 and U+FFA0, Khmer's U+17B4-U+17B5, Mongolian's U+180B-U+180F, the variation
# selectors U+FE00-U+FE0F and U+E0100-U+E01EF, and the unassigned rest of U+E0000-U+E0FFF).
# tests/unit/test_safe_text.py checks the list against this Python's Unicode tables.
_INVISIBLE = (
    "\x00-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2"
    "\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\u3164\ud800-\udfff\ufe00-\ufe0d\ufeff\uffa0\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001345f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
# The emoji and text presentation selectors U+FE0E and U+FE0F are kept right after a
# visible character that is no blank ("\u2764\ufe0f" is a red heart): one, never a run of
# them (which can carry data), never on its own.
_PRESENTATION = "\ufe0e\ufe0f"
_UNSAFE = re.compile(f"[{_INVISIBLE}{_PRESENTATION}]")
_NO_BASE = re.compile(f"[{_INVISIBLE}{_PRESENTATION}\\s]")
"""What a presentation selector cannot follow and be kept."""


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _PRESENTATION:
        start = match.start()
        if start > 0 and _NO_BASE.match(match.string, start - 1) is None:
            return char
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        # A byte that was not valid UTF-8, as os.fsdecode keeps it: show the byte.
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code > 0xFFFF:
        return f"\\U{code:08x}"
    return f"\\u{code:04x}"


def clean(text: str) -> str:
    """``text`` with every control or invisible format character as a visible escape.

    The result holds no character a terminal acts on, is one line, and encodes as UTF-8.
    Printable text, non-Latin scripts and emoji are kept as they are.
    """
    if text.isprintable() and text.isascii():
        return text
    return _UNSAFE.sub(_escape, text)


def clean_argv(argv: tuple[str, ...] | list[str]) -> str:
    """A command line for display: its arguments cleaned and joined by spaces."""
    return " ".join(clean(arg) for arg in argv)


def clean_lines(text: str) -> str:
    """A message gputop wrote over several lines: each line cleaned, the line breaks kept.

    Only for gputop's own multi-line messages; a value from outside is cleaned on its own
    first (with :func:`clean`), so its newlines can never make a line of their own.
    """
    return "\n".join(clean(line) for line in text.split("\n"))


# SGR, "select graphic rendition": colours and bold. The only sequence a log keeps; it can
# change how text looks, never the title, the clipboard, the cursor or the screen.
_SGR = re.compile("\x1b\\[[0-9;:]{0,64}m")
LINE_CONTROL = "\n\r\t\b"
"""What a log keeps besides colours: newline, carriage return (progress bars), tab, backspace."""


def clean_keeping_colours(text: str, keep: str = LINE_CONTROL) -> str:
    """``text`` cleaned like :func:`clean`, except colour sequences and the ``keep`` characters.

    For job logs shown on a terminal: a training script's coloured output and its progress
    bars (``\\r``) look as they should; every other escape sequence is shown, not obeyed.
    """
    if text.isprintable() and text.isascii():
        return text
    parts: list[str] = []
    position = 0
    for match in _SGR.finditer(text):
        parts.append(_clean_keeping(text[position : match.start()], keep))
        parts.append(match.group())
        position = match.end()
    parts.append(_clean_keeping(text[position:], keep))
    return "".join(parts)


def _clean_keeping(text: str, keep: str) -> str:
    return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)


_PARTIAL_SGR = re.compile("\x1b(\\[[0-9;:]{0,64})?\\Z")


def split_unfinished_sgr(text: str) -> tuple[str, str]:
    """``text`` cut before a colour sequence its end may have started but not finished.

    A log read in pieces can end in the middle of ``ESC[1;31m``: the start waits for the
    next piece, so the whole sequence is kept rather than shown as ``\\e[1;3`` and ``1m``.
    """
    match = _PARTIAL_SGR.search(text)
    if match is None:
        return text, ""
    return text[: match.start()], text[match.start() :]
