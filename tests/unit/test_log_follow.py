"""Following a job's log: whole characters across reads, capped reads, safe lines.

The log is a real file written in pieces, as a job writes it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputop.core.jobs.logs import LogFollower, TerminalLogFilter, shown_line

BAR = "train: 40%|████      | 4/10"
"""tqdm's bar: every block is three bytes of UTF-8."""


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as log:
        log.write(data)


def test_a_character_split_across_two_reads_stays_whole(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    encoded = (BAR + "\n").encode()
    cut = encoded.index("█".encode()) + 1  # inside the first block character
    append(log, encoded[:cut])
    follower = LogFollower(str(log))
    assert follower.read().lines == ()
    append(log, encoded[cut:])
    assert follower.read().lines == (BAR,)


def test_a_progress_bar_shows_its_last_rewrite(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    append(log, b"epoch 1\r 10%\r 20%\r\n")
    assert LogFollower(str(log)).read().lines == (" 20%",)


def test_lines_keep_colours_and_show_every_other_escape(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    append(log, b"\x1b[1;31mloss\x1b[0m \x1b]52;c;aGk=\x07\x1b[2J\tok\n")
    (line,) = LogFollower(str(log)).read().lines
    assert line == "\x1b[1;31mloss\x1b[0m \\e]52;c;aGk=\\x07\\e[2J\tok"


def test_one_read_takes_at_most_its_cap_and_the_rest_comes_next(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    append(log, b"".join(b"line %04d\n" % i for i in range(100)))  # 1000 bytes
    follower = LogFollower(str(log), first_read_bytes=10_000, max_read_bytes=10_000)
    assert len(follower.read().lines) == 100
    append(log, b"".join(b"more %04d\n" % i for i in range(3000)))  # 30000 bytes
    follower.max_read_bytes = 25_000
    read = follower.read()
    assert read.skipped_bytes == 5_000  # behind by more than the cap: skip to the tail
    assert read.lines[0] == "more 0501"  # whole lines only after a skip
    assert read.lines[-1] == "more 2999"
    assert follower.read().lines == ()


def test_the_first_read_shows_the_end_of_a_long_log(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    append(log, b"".join(b"line %04d\n" % i for i in range(1000)))
    read = LogFollower(str(log), first_read_bytes=100).read()
    assert read.lines == tuple(f"line {i:04d}" for i in range(991, 1000))
    assert read.skipped_bytes == 0  # like tail: not a loss worth a line


def test_a_truncated_log_is_read_again_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    append(log, b"old 1\nold 2\n")
    follower = LogFollower(str(log))
    follower.read()
    log.write_bytes(b"new\n")
    read = follower.read()
    assert read.restarted and read.lines == ("new",)


def test_a_replaced_log_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    append(log, b"old\n")
    follower = LogFollower(str(log))
    follower.read()
    replacement = tmp_path / "new.log"
    replacement.write_bytes(b"first\nsecond\n")
    os.replace(replacement, log)
    read = follower.read()
    assert read.restarted and read.lines == ("first", "second")


def test_a_missing_log_says_so(tmp_path: Path) -> None:
    assert LogFollower(str(tmp_path / "none.log")).read().missing


def test_an_unreadable_log_says_why(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    append(log, b"x\n")
    log.chmod(0)
    try:
        if os.access(log, os.R_OK):
            pytest.skip("running as root: a mode-0 file is still readable")
        read = LogFollower(str(log)).read()
        assert read.error == "Permission denied"
    finally:
        log.chmod(0o600)


def test_a_line_without_end_is_shown_in_pieces(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    append(log, b"x" * 200_000)
    lines = LogFollower(str(log), first_read_bytes=1 << 20).read().lines
    assert [len(line) for line in lines] == [65536, 65536, 65536]


def test_shown_line_keeps_text_before_a_windows_line_end() -> None:
    assert shown_line("done\r") == "done"


# -- gputop jobs log on a terminal: the filter, fed in pieces ----------------------------------


def test_terminal_filter_keeps_a_colour_sequence_split_across_pieces() -> None:
    terminal = TerminalLogFilter()
    out = terminal.feed(b"a\x1b[1;3") + terminal.feed(b"1mred\x1b[0m\n") + terminal.finish()
    assert out == "a\x1b[1;31mred\x1b[0m\n"


def test_terminal_filter_keeps_line_control_and_shows_other_escapes() -> None:
    terminal = TerminalLogFilter()
    out = terminal.feed(b"10%\r20%\b\tz\n\x1b]0;title\x07\x1b[2J\x1b[H\xc2\x9b") + terminal.finish()
    assert out == "10%\r20%\b\tz\n\\e]0;title\\x07\\e[2J\\e[H\\x9b"


def test_terminal_filter_keeps_a_character_split_across_pieces() -> None:
    terminal = TerminalLogFilter()
    encoded = "█".encode()
    assert terminal.feed(encoded[:1]) == ""
    assert terminal.feed(encoded[1:]) == "█"


def test_terminal_filter_shows_an_escape_left_unfinished_at_the_end() -> None:
    terminal = TerminalLogFilter()
    assert terminal.feed(b"end\x1b[3") == "end"
    assert terminal.finish() == "\\e[3"
