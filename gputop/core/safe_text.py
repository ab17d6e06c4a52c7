"""The one sanitiser for text that comes from outside gputop.

Process command lines and user names (of any user on the machine), job names, commands,
working directories, log lines, scenario strings and host names can hold bytes that a
terminal obeys: ESC sequences that set the window title or the clipboard (OSC 0, OSC 52),
clear the screen or move the cursor; newlines that forge table rows; bidirectional
overrides that make text read differently from what it is. Every such string passes
through :func:`clean` before it reaches a terminal, in every output (dashboard, dialogs,
``snapshot``, ``jobs``, ``map``), and is then drawn as plain text, never parsed as markup.

Control characters become visible escapes (``\\x1b``, ``\\n``), never bytes: a person sees
that something odd is there, and the terminal is never told to do anything. See
docs/security.md for the guarantees this module is part of.
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}

# C0 controls, DEL, C1 controls; surrogates (undecodable bytes kept by surrogateescape);
# Unicode line and paragraph separators; bidirectional embeddings, overrides and isolates;
# zero-width and other invisible format characters that can hide or reorder text.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\u200b-\u200f\u061c\ufeff\ufff9-\ufffb]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        # A byte that was not valid UTF-8, as os.fsdecode keeps it: show the byte.
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
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
