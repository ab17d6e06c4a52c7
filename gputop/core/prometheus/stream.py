"""A JSON document read while it arrives, never held whole (a Prometheus answer, docs/fleet.md).

``Stream`` keeps a window of the text (about a megabyte) and the caller walks the document's
known shape (``walk_object``, ``walk_array``), decoding each small value whole (``value``),
so an answer costs what the caller keeps of it, never its size. A value larger than
``MAX_VALUE_CHARS`` is refused, or passed over unread where the caller can do without it
(``value_or_skip``: one series among many); nesting is bounded by the caller's walk and,
inside a value, by ``RecursionError`` (said as "nested too deeply"). A range query's points
and an instant query's items are decoded many at a time, at the C decoder's speed
(``points``, ``instant_items``).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable

MAX_VALUE_CHARS = 1 << 20
"""The largest one value may be (a series' labels, one point): a megabyte of text."""
MAX_INT_CHARS = 400
"""Prometheus writes 1e300 as 301 digits; a longer integer is no value it sends."""
_KEEP_CHARS = 1 << 16
"""Text already read is dropped once this much of it lies behind the position."""
_BATCH_CHARS = 1 << 16
"""Points decoded together: about 3,000 of a range query's."""
_SPACE = re.compile(r"[ \t\n\r]*")
_STRING_RUN = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
"""A string's text up to its closing quote (or the end of what is read), escapes and all."""
_STRUCTURE = re.compile(r'["\[\]{}]')
_SCALAR_END = re.compile(r"[ \t\n\r,\]}:]")
SKIPPED = object()
"""``value_or_skip``'s answer for a value passed over."""


class TooLarge(ValueError):
    """One value of the document is larger than ``MAX_VALUE_CHARS``."""


def _bounded_int(text: str) -> int:
    """A JSON integer of at most ``MAX_INT_CHARS`` digits (Python 3.11 and later refuse more
    than 4,300 themselves; 3.10 would spend quadratic time on them)."""
    if len(text) > MAX_INT_CHARS:
        raise ValueError("an integer too long")
    return int(text)


DECODER = json.JSONDecoder(parse_int=_bounded_int)


class Stream:
    """The text of a document, read with ``read`` (``b""`` at its end) as it is needed."""

    def __init__(self, read: Callable[[], bytes]) -> None:
        self._read = read
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.text = ""
        self.at = 0
        self.eof = False

    def more(self) -> bool:
        """Read on; False at the end of the document."""
        if self.eof:
            return False
        chunk = self._read()
        if self.at >= _KEEP_CHARS:
            self.text, self.at = self.text[self.at :], 0
        if not chunk:
            self.eof = True
            self.text += self._decoder.decode(b"", final=True)  # a cut character: ValueError
            return False
        self.text += self._decoder.decode(chunk)
        return True

    def fill(self, chars: int) -> None:
        """At least ``chars`` characters after the position, unless the document ends first."""
        while len(self.text) - self.at < chars and self.more():
            pass

    def peek(self) -> str:
        """The next character that is not white space ("" at the end), not taken."""
        while True:
            match = _SPACE.match(self.text, self.at)
            self.at = match.end() if match else self.at
            if self.at < len(self.text) or not self.more():
                return self.text[self.at] if self.at < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"{char!r} expected")
        self.at += 1

    def value(self) -> object:
        """The next value, decoded whole (``TooLarge`` past ``MAX_VALUE_CHARS``)."""
        self.peek()
        while True:
            try:
                value, end = DECODER.raw_decode(self.text, self.at)
            except ValueError:
                if self.eof:
                    raise
            else:
                # A number at the very end of what was read may go on in the next chunk.
                if end < len(self.text) or self.eof:
                    self.at = end
                    return value
            if len(self.text) - self.at > MAX_VALUE_CHARS:
                raise TooLarge("a value too large")
            self.more()

    def value_or_skip(self) -> object:
        """The next value, or ``SKIPPED`` where it is larger than ``MAX_VALUE_CHARS``: then
        passed over unread (``skip``), the document read on after it."""
        try:
            return self.value()
        except TooLarge:
            self.skip()
            return SKIPPED

    def skip(self) -> None:
        """Pass over the next value without decoding it, whatever its size: only its strings'
        quotes and its brackets are looked for, and the text behind is dropped as it is read.
        A document that ends inside it: ``ValueError``."""
        if self.peek() not in ('"', "[", "{"):
            while (match := _SCALAR_END.search(self.text, self.at)) is None:
                self.at = len(self.text)
                if not self.more():
                    return
            self.at = match.start()
            return
        depth = 0
        while True:
            match = _STRUCTURE.search(self.text, self.at)
            if match is None:
                self.at = len(self.text)
                if not self.more():
                    raise ValueError("the document ends inside a value")
                continue
            char = match.group()
            self.at = match.end()
            if char == '"':
                self._skip_string()
                if depth == 0:
                    return
            elif char in "[{":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return

    def _skip_string(self) -> None:
        """Past the closing quote of the string the position is inside (at the decoder's
        speed: a label of escapes costs what one of letters does)."""
        while True:
            run = _STRING_RUN.match(self.text, self.at)
            end = run.end() if run is not None else self.at
            if end < len(self.text) and self.text[end] == '"':
                self.at = end + 1
                return
            self.at = end  # the end of what is read, or a backslash whose escape is to come
            if not self.more():
                raise ValueError("the document ends inside a string")

    def end(self) -> None:
        """Nothing but white space after the document."""
        if self.peek() != "":
            raise ValueError("more after the document")


def walk_object(stream: Stream, member: Callable[[str], None]) -> None:
    """An object: ``member(key)`` reads each member's value from the stream."""
    stream.expect("{")
    if stream.peek() == "}":
        stream.at += 1
        return
    while True:
        key = stream.value()
        if not isinstance(key, str):
            raise ValueError("a key that is not a string")
        stream.expect(":")
        member(key)
        if _next(stream, "}"):
            return


def walk_array(stream: Stream, item: Callable[[], None]) -> None:
    """An array: ``item()`` reads each item from the stream."""
    stream.expect("[")
    if stream.peek() == "]":
        stream.at += 1
        return
    while True:
        item()
        if _next(stream, "]"):
            return


def _next(stream: Stream, closing: str) -> bool:
    """After an item: True at the closing bracket, False after a comma."""
    char = stream.peek()
    if char == ",":
        stream.at += 1
        return False
    if char == closing:
        stream.at += 1
        return True
    raise ValueError("no comma")


def points(stream: Stream, point: Callable[[object], None]) -> None:
    """An array of a range query's points (``[time, "value"]``, each small), given one by one
    to ``point``, decoded a run at a time (``_runs``)."""

    def each(batch: list[object]) -> None:
        for one in batch:
            point(one)

    _runs(stream, '"]', each)


def instant_items(
    stream: Stream, take: Callable[[list[object]], None], passed_over: Callable[[], None]
) -> None:
    """An array of an instant vector's items (``{"metric": {...}, "value": [time, "v"]}``,
    each small), given to ``take`` a run at a time (``_runs``); ``passed_over()`` for each
    item larger than ``MAX_VALUE_CHARS``, not read."""
    _runs(stream, '"]}', take, passed_over)


def _runs(
    stream: Stream,
    end: str,
    take: Callable[[list[object]], None],
    passed_over: Callable[[], None] | None = None,
) -> None:
    """An array of small items that each end with ``end``, given to ``take`` a run at a time:
    the text up to the last ``end`` of the next ``_BATCH_CHARS`` (or of the array), which
    decodes as a list of the items it holds exactly when it ends where an item ends (a cut
    inside a string, say one holding ``end``, leaves it unfinished: then one item is decoded
    alone). An item larger than ``MAX_VALUE_CHARS`` is passed over (``passed_over()``)."""
    stream.expect("[")
    if stream.peek() == "]":
        stream.at += 1
        return
    width = len(end)
    while True:
        stream.fill(_BATCH_CHARS)
        text, at = stream.text, stream.at
        limit = at + _BATCH_CHARS
        close = text.find(end + "]", at, limit)
        cut = close + width if close >= 0 else text.rfind(end, at, limit) + width
        batch = None
        if cut > at + width:
            try:
                batch = DECODER.decode("[" + text[at:cut] + "]")
            except (ValueError, RecursionError):
                batch = None
        if isinstance(batch, list):
            stream.at = cut
            take(batch)
        else:
            one = stream.value_or_skip()  # a point of a megabyte (none Prometheus sends): left out
            if one is not SKIPPED:
                take([one])
            elif passed_over is not None:
                passed_over()
        if _next(stream, "]"):
            return
