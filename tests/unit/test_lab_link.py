"""How a host link reads ssh's output: lines of bounded length, every byte counted."""

from __future__ import annotations

import io

import pytest

from gputop.core.remote import host_link


def test_an_overlong_line_is_dropped_in_pieces_and_the_next_line_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(host_link, "MAX_LINE_BYTES", 10)
    stream = io.BytesIO(b'{"a":1}\n' + b"x" * 25 + b"\n" + b"ok\n")

    pieces = list(host_link._lines(stream))

    assert pieces == [(8, b'{"a":1}\n'), (10, None), (10, None), (6, None), (3, b"ok\n")]
    assert sum(size for size, _ in pieces) == len(stream.getvalue())
