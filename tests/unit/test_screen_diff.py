"""Sending only the changed cells must leave the terminal showing what Textual drew."""

from __future__ import annotations

import re

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.drivers.headless_driver import HeadlessDriver
from textual.drivers.linux_driver import LinuxDriver

from gputop.tui.diff_driver import DiffingLinuxDriver, driver_with_screen_diff
from gputop.tui.screen_diff import (
    DIFFED,
    HOME,
    MERGE_GAP,
    NOT_FOLLOWED,
    SHIFT_MIN_CELLS,
    UNCHANGED,
    WHOLE,
    ScreenDiff,
)
from gputop.tui.screen_pens import change_pen, pen_of, pen_order
from gputop.tui.textual_compat import QuietInput

SIZE = (12, 4)
RED = "\x1b[38;2;255;0;0m"
BLUE = "\x1b[38;2;0;0;255;48;2;9;9;9m"
BOLD_ITALIC = "\x1b[1;3;38;2;0;255;0;48;2;9;9;9m"
REVERSE = "\x1b[7;4m"


class Terminal:
    """A real terminal emulator (pyte): what a person would see, colours and attributes."""

    def __init__(self, columns: int, rows: int) -> None:
        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.Stream(self.screen)

    def feed(self, data: str) -> None:
        self.stream.feed(data)

    @property
    def cells(self) -> list[list[tuple[object, ...]]]:
        return [
            [
                (c.data, c.fg, c.bg, c.bold, c.italics, c.underscore, c.reverse)
                for c in (self.screen.buffer[y][x] for x in range(self.screen.columns))
            ]
            for y in range(self.screen.lines)
        ]


def frame(*lines: tuple[int, int, str, str]) -> str:
    """Textual's way: every line placed, every segment in its colour then reset."""
    return "".join(f"\x1b[{y + 1};{x + 1}H{sgr}{text}\x1b[0m" for y, x, sgr, text in lines)


def test_a_frame_that_changes_nothing_sends_nothing() -> None:
    diff = ScreenDiff()
    first = frame((0, 0, RED, "GPU  93%"), (1, 0, "", "mem"))
    assert "GPU  93%" in diff.filter(first, SIZE)  # nothing known yet: all of it
    assert diff.filter(first, SIZE) == ""


def test_one_changed_character_is_sent_alone_in_its_colour() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "GPU  93%"), (1, 0, BLUE, "mem")), SIZE)  # leaves it blue
    update = diff.filter(frame((0, 0, RED, "GPU  94%"), (1, 0, BLUE, "mem")), SIZE)
    assert update == "\x1b[0;38;2;255;0;0m\x1b[1;7H4"  # shorter than changing both colours


def test_a_frame_starts_in_the_pen_the_last_one_left() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "GPU  93%"), (1, 0, BLUE, "mem 1")), SIZE)
    # red, then blue (screen order, the same cost): the terminal's pen is left blue
    update = diff.filter(frame((0, 0, RED, "GPU  94%"), (1, 0, BLUE, "mem 2")), SIZE)
    assert update == "\x1b[2;5H2\x1b[0;38;2;255;0;0m\x1bM\x1b[C4"  # a row up, a column on
    # a change in the pen the terminal has needs no colour at all
    update = diff.filter(frame((0, 0, RED, "GPU  95%"), (1, 0, BLUE, "mem 2")), SIZE)
    assert update == "\x1b[1;7H5"


def test_the_colours_go_in_the_order_of_fewest_bytes_not_only_the_nearest_each_time() -> None:
    white_dark, red_dark = "38;2;224;224;224;48;2;18;18;18", "1;38;2;244;0;95;48;2;18;18;18"
    green_grey, green_blue = "38;2;152;224;36;48;2;30;30;30", "38;2;152;224;36;48;2;21;56;84"
    colours = [white_dark, red_dark, green_grey, green_blue]
    diff = ScreenDiff()

    def cells(text: str, last: str) -> str:
        return frame(
            *(
                (0, 2 * i, f"\x1b[{c}m", t)
                for i, (c, t) in enumerate(zip(colours, text, strict=True))
            ),
            (3, 0, f"\x1b[{green_blue}m", last),
        )

    diff.filter(cells("abcd", "z"), SIZE)
    second = diff.filter(cells("abcd", "y"), SIZE)
    assert second == f"\x1b[0;{green_blue}m\x1b[4Hy"  # the terminal's pen: green on blue
    # From green on blue, the nearest each time (green on grey, white on dark, red on dark)
    # is 70 bytes of colour; ending on green on grey instead is 67.
    update = diff.filter(cells("ABCD", "y"), SIZE)
    assert sum(map(len, re.findall(r"\x1b\[[0-9;]*m", update))) == 67
    textual = Terminal(*SIZE)
    textual.feed(cells("ABCD", "y"))
    ours = Terminal(*SIZE)
    ours.feed(cells("abcd", "z") + second + update)
    assert ours.cells == textual.cells


pens = st.lists(
    st.tuples(
        st.sampled_from(["", "1;", "3;", "1;3;"]),
        st.sampled_from(["", "31;", "38;2;224;224;224;", "38;2;88;209;235;", "38;5;196;"]),
        st.sampled_from(["", "40", "48;2;18;18;18", "48;2;30;30;30", "48;5;234"]),
    ).map(lambda p: f"\x1b[{''.join(p)}m"),
    min_size=1,
    max_size=9,
    unique=True,
)


@settings(max_examples=300, deadline=None)
@given(pens, pens)
def test_the_order_of_colours_is_never_dearer_than_the_nearest_each_time(
    colours: list[str], start: list[str]
) -> None:
    def cost(pen: object, sgr: str) -> int:
        return 0 if pen_of(sgr) == pen else len(change_pen(pen, pen_of(sgr), sgr))  # type: ignore[arg-type]

    def total(order: list[str], pen: object) -> int:
        spent = 0
        for sgr in order:
            spent, pen = spent + cost(pen, sgr), pen_of(sgr)
        return spent

    pen = pen_of(start[0])
    order = pen_order({sgr: [] for sgr in colours}, pen)
    assert sorted(order) == sorted(colours)
    nearest, left, at = [], list(colours), pen
    while left:
        sgr = min(left, key=lambda s: cost(at, s))
        left.remove(sgr)
        nearest.append(sgr)
        at = pen_of(sgr)
    assert total(order, pen) <= total(nearest, pen)


def test_output_passed_on_starts_from_a_reset_pen() -> None:
    """A frame leaves its last colour set; what the diff passes on as it is (leaving the
    alternate screen, a sequence it does not follow) gets a reset first, once."""
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "GPU  93%")), SIZE)
    assert diff.filter("\x1b[?25l", SIZE) == "\x1b[?25l"  # harmless: the pen stays
    assert diff.filter("\x1b[?1049l", SIZE) == "\x1b[0m\x1b[?1049l"
    assert diff.filter("\x1b[?1049h", SIZE) == "\x1b[0m\x1b[?1049h"  # not known: again
    update = diff.filter(frame((0, 0, RED, "GPU  93%")), SIZE)
    assert update.startswith("\x1b[0;38;2;255;0;0m")  # from a pen not known: reset and set


def test_the_pen_a_frame_left_is_released_once() -> None:
    diff = ScreenDiff()
    assert diff.release_pen() == ""  # nothing set yet
    diff.filter(frame((0, 0, RED, "GPU  93%")), SIZE)
    assert diff.release_pen() == "\x1b[0m"
    assert diff.release_pen() == ""
    assert diff.filter("\x1b[?1049l", SIZE) == "\x1b[?1049l"


def test_a_change_on_the_next_row_is_reached_by_the_shorter_relative_move() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "GPU 1"), (1, 0, RED, "MEM 11")), SIZE)
    update = diff.filter(frame((0, 0, RED, "GPU 2"), (1, 0, RED, "MEM 12")), SIZE)
    assert update == "\x1b[1;5H2\x1b[B2"  # the pen is still red
    update = diff.filter(frame((0, 0, RED, "GPU 3"), (1, 0, RED, "MEM 23")), SIZE)
    assert update == "\x1b[1;5H3\x1b[B\b23"  # one cell back: a backspace


def test_where_the_terminal_keeps_line_feeds_a_row_down_is_one_byte() -> None:
    diff = ScreenDiff()
    diff.line_feeds = True
    first = diff.filter(frame((0, 0, RED, "GPU 1"), (1, 0, RED, "MEM 11")), SIZE)
    update = diff.filter(frame((0, 0, RED, "GPU 3"), (1, 0, RED, "MEM 23")), SIZE)
    assert update == "\x1b[1;5H3\n\b23"
    terminal = Terminal(*SIZE)  # pyte: a line feed moves down, as with ONLCR off
    terminal.feed(frame((0, 0, RED, "GPU 3"), (1, 0, RED, "MEM 23")))
    shown = Terminal(*SIZE)
    shown.feed(first + update)
    assert shown.cells == terminal.cells


def test_where_the_terminal_keeps_line_feeds_output_passed_on_means_what_it_says() -> None:
    """Textual writes a line feed meaning a new line (ONLCR on): where the terminal keeps
    line feeds as they are, output passed on has each bare one sent as CR LF."""
    diff = ScreenDiff()
    diff.line_feeds = True
    assert diff.filter("\x1b]0;title\x07", SIZE) == "\x1b]0;title\x07"
    assert diff.filter("a\nb\r\nc\x1b[5n", SIZE) == "a\r\nb\r\nc\x1b[5n"
    assert diff.last_outcome == NOT_FOLLOWED
    diff.line_feeds = False
    # after output it did not follow, the pen is not known: reset first
    assert diff.filter("a\nb\x1b[5n", SIZE) == "\x1b[0ma\nb\x1b[5n"


def test_unchanged_box_characters_are_moved_over_not_resent() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "1│││1")), SIZE)
    update = diff.filter(frame((0, 0, RED, "2│││2")), SIZE)
    # the right one first, then a carriage return: 9 bytes, where moving over the three box
    # characters would be 10 (and resending them 14)
    assert update == "\x1b[1;5H2\r2"


def test_after_the_last_column_the_next_move_is_absolute() -> None:
    """A terminal's cursor waits to wrap there; a relative move from it is not portable."""
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "abcdefghijk1"), (1, 0, RED, "abcdefghijk1")), SIZE)
    update = diff.filter(frame((0, 0, RED, "abcdefghijk2"), (1, 0, RED, "abcdefghijk2")), SIZE)
    assert update == "\x1b[1;12H2\x1b[2;12H2"


def test_a_scrolling_sparkline_is_shifted_by_the_terminal() -> None:
    """Delete a character at its left end, insert one at its right end: the rest of the row
    (the card's border, the next card) stays in place, and one new point is written."""
    wide = (40, 2)
    old = "│ ▇█▇██▇█▇▇█▇ ││ x │"
    new = "│ █▇██▇█▇▇█▇▁ ││ x │"
    textual, ours, diff = Terminal(*wide), Terminal(*wide), ScreenDiff()
    for line in (old, new):
        data = frame((0, 0, RED, line.ljust(wide[0])), (1, 0, BLUE, "status"))
        textual.feed(data)
        ours.feed(diff.filter(data, wide))
    assert ours.cells == textual.cells
    update = ScreenDiff()
    update.filter(frame((0, 0, RED, old.ljust(wide[0])), (1, 0, "", "status")), wide)
    sent = update.filter(frame((0, 0, RED, new.ljust(wide[0])), (1, 0, "", "status")), wide)
    # in the colour it has (the pen the last frame left): the new point is written
    # straight after the insert
    assert sent == "\x1b[1;3H\x1b[P\x1b[10C\x1b[@▁"


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="▁▇█ ab│", min_size=12, max_size=12),
    st.integers(0, 10),
    st.integers(1, 12),
    st.sampled_from("▁▇█ "),
)
def test_a_row_shifted_left_shows_what_textual_wrote(
    row: str, start: int, length: int, new_point: str
) -> None:
    end = min(start + length, SIZE[0] - 1)
    shifted = row[:start] + row[start + 1 : end + 1] + new_point + row[end + 1 :]
    textual, ours, diff = Terminal(*SIZE), Terminal(*SIZE), ScreenDiff()
    for line in (row, shifted):
        data = frame((1, 0, RED, line[: SIZE[0]]), (2, 3, BLUE, "x"))
        textual.feed(data)
        ours.feed(diff.filter(data, SIZE))
        assert ours.cells == textual.cells


def test_the_cursor_is_put_back_where_textual_left_it() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "GPU  93%")) + "\x1b[4;1H", SIZE)
    update = diff.filter(frame((0, 0, RED, "GPU  94%")) + "\x1b[4;1H", SIZE)
    assert update.endswith("\x1b[4;1H")


def test_a_hidden_cursor_is_not_sent_home_and_the_next_frame_moves_on_from_where_it_is() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "GPU  93%"), (2, 0, RED, "mem 10")) + HOME, SIZE)
    # Textual ends each frame at the top-left cell when no widget wants the cursor
    update = diff.filter(frame((0, 0, RED, "GPU  94%"), (2, 0, RED, "mem 10")) + HOME, SIZE)
    # the first frame left the cursor after "mem 10", not at home: two rows up from there
    assert update == "\x1b[2A4"
    # ... and the next frame's first move starts from after the 4: here none at all
    update = diff.filter(frame((0, 0, RED, "GPU  94#"), (2, 0, RED, "mem 10")) + HOME, SIZE)
    assert update == "#"


def test_after_other_output_the_next_frame_moves_from_nowhere_known() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "GPU  93%")) + HOME, SIZE)
    diff.filter(frame((0, 0, RED, "GPU  94%")) + HOME, SIZE)
    diff.filter("\x1b[?25l", SIZE)  # a mode: it keeps the screen, not the cursor's place
    update = diff.filter(frame((0, 0, RED, "GPU  95%")) + HOME, SIZE)
    assert update == "\x1b[1;7H5"


def test_a_cursor_a_widget_wants_is_still_sent() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "GPU  93%")) + HOME, SIZE)
    update = diff.filter(frame((0, 0, RED, "GPU  94%")) + "\x1b[2;3H", SIZE)
    assert update == "\b\b4\x1b[2;3H"  # from where the first frame left it, then there
    update = diff.filter(frame((0, 0, RED, "GPU  95%")) + "\x1b[2;3H", SIZE)
    assert update == "\x1b[1;7H5\x1b[2;3H"  # put back after every update


def test_a_first_full_repaint_goes_through_unchanged_and_a_repeat_sends_nothing() -> None:
    # Textual paints the whole screen twice as it starts: the second costs nothing.
    diff = ScreenDiff()
    columns, rows = SIZE
    full = frame(*((y, 0, BLUE, "x" * columns) for y in range(rows)))
    assert diff.filter(full, SIZE) == full
    assert diff.filter(full, SIZE) == ""


def test_a_full_repaint_of_wide_characters_goes_through_unchanged() -> None:
    diff = ScreenDiff()
    columns, rows = SIZE
    full = frame(*((y, 0, BLUE, "漢" * (columns // 2)) for y in range(rows)))
    assert diff.filter(full, SIZE) == full
    assert diff.filter(full, SIZE) == ""


def test_a_full_repaint_after_forget_goes_through_whole() -> None:
    # ctrl+l: the terminal may show something else; every cell must be sent again.
    diff = ScreenDiff()
    columns, rows = SIZE
    full = frame(*((y, 0, BLUE, "x" * columns) for y in range(rows)))
    diff.filter(full, SIZE)
    diff.forget()
    assert diff.filter(full, SIZE) == full


def test_a_full_repaint_that_changes_a_little_sends_only_that() -> None:
    diff = ScreenDiff()
    columns, rows = SIZE
    diff.filter(frame(*((y, 0, BLUE, "x" * columns) for y in range(rows))), SIZE)
    lines = [(y, 0, BLUE, "x" * columns) for y in range(rows)]
    lines[2] = (2, 0, BLUE, "x" * (columns - 1) + "y")
    update = diff.filter(frame(*lines), SIZE)
    assert "y" in update and "x" not in update


def test_a_resized_terminal_gets_whole_frames_again() -> None:
    diff = ScreenDiff()
    line = frame((0, 0, RED, "GPU  93%"))
    diff.filter(line, SIZE)
    assert "GPU  93%" in diff.filter(line, (20, 6))


def test_after_a_resize_the_first_move_is_from_nowhere_known() -> None:
    """A terminal that shrinks puts its cursor where it likes (tmux and xterm keep it on the
    screen): a frame of cells after the resize is placed as if the cursor were unknown, not
    moved to from where the last frame left it (row 7 of a screen now 6 rows high)."""
    diff = ScreenDiff()
    diff.filter(frame(*[(y, 0, RED, "." * 20) for y in range(8)]) + HOME, (20, 8))
    diff.filter(frame((6, 10, RED, "ab")) + HOME, (20, 8))  # leaves the cursor at row 7
    late = frame((5, 13, RED, "xy")) + HOME  # a card's figure, before the whole repaint
    assert diff.filter(late, (20, 6)) == "\x1b[6;14Hxy"  # the pen is still red


@pytest.mark.parametrize(
    "left_set", ["\x1b[2;3r", "\x1b[20h", "\x1b[4;7m"], ids=["region", "newline", "pen"]
)
def test_ctrl_l_puts_back_the_terminal_state_the_diffs_moves_rely_on(left_set: str) -> None:
    """Another program writing on the terminal may leave a scrolling region (DECSTBM) or
    newline mode (LNM) set, where Textual's absolute moves still land but the diff's line
    feed at the region's bottom row scrolls part of the screen, or returns the carriage
    too; or a pen the repaint's first colour does not reset (underline, reverse), which
    Textual's next write of the line puts right and the diff never sends again. ``ctrl+l``
    (``redraw``) sets all three back before the repaint."""
    textual, ours = Terminal(*SIZE), Terminal(*SIZE)
    diff = ScreenDiff()
    diff.line_feeds = True
    rows = ["a" * 12, "b" * 12, "c" * 12, "d" * 12]
    for changed in ((), (2, 3)):
        for y in changed:
            rows[y] = rows[y][:4] + "XY"[y - 2] + rows[y][5:]
        data = frame(*((y, 0, "", row) for y, row in enumerate(rows))) + HOME  # plain
        textual.feed(data)
        ours.feed(diff.filter(data, SIZE))
        if not changed:
            for terminal in (textual, ours):
                terminal.feed(left_set)  # by something else (the region: rows 2 and 3)
            diff.redraw()  # ctrl+l, then Textual repaints every cell
            ours.feed(diff.filter(data, SIZE))
            textual.feed(data)
    assert ours.cells == textual.cells


def test_leaving_the_alternate_screen_forgets_what_was_shown() -> None:
    diff = ScreenDiff()
    line = frame((0, 0, RED, "GPU  93%"))
    diff.filter(line, SIZE)
    assert diff.filter("\x1b[?1049l", SIZE) == "\x1b[0m\x1b[?1049l"  # the pen reset too
    assert "GPU  93%" in diff.filter(line, SIZE)


def test_mode_changes_and_queries_keep_what_was_shown() -> None:
    diff = ScreenDiff()
    line = frame((0, 0, RED, "GPU  93%"))
    diff.filter(line, SIZE)
    for harmless in ("\x1b[?2026h", "\x1b[?1000h", "\x1b[?2026$p", "\x1b]22;default\x07"):
        assert diff.filter(harmless, SIZE) == harmless
    assert diff.filter(line, SIZE) == ""


def test_a_change_beside_a_wide_character_sends_it_whole() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, "", "ab漢c")), SIZE)
    update = diff.filter(frame((0, 0, "", "ab漢d")), SIZE)
    assert update == "\x1b[1;5Hd"
    update = diff.filter(frame((0, 0, "", "ab字d")), SIZE)
    assert "字" in update


segments = st.lists(
    st.tuples(
        st.integers(0, SIZE[1] - 1),
        st.integers(0, SIZE[0] - 6),
        st.sampled_from(["", RED, BLUE, BOLD_ITALIC, REVERSE]),
        st.text(alphabet="ab %█漢", min_size=1, max_size=3),
    ),
    min_size=1,
    max_size=6,
)


cursor_moves = st.sampled_from(["", HOME, "\x1b[4;1H", "\x1b[2;12H", "\x1b[?25l"])
"""What follows a frame: Textual's cursor move (home when no widget wants the cursor), or
a mode between frames."""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(segments, cursor_moves), min_size=1, max_size=8), st.booleans())
def test_the_terminal_shows_what_textual_wrote(
    frames: list[tuple[list[tuple], str]], feeds: bool
) -> None:
    textual, ours = Terminal(*SIZE), Terminal(*SIZE)
    diff = ScreenDiff()
    diff.line_feeds = feeds  # pyte keeps line feeds as they are (ONLCR off)
    for lines, after in frames:
        data = frame(*lines) + after
        textual.feed(data)
        ours.feed(diff.filter(data, SIZE))
        assert ours.cells == textual.cells
        if after and after != HOME:  # a cursor a widget wants is where Textual put it
            screen = ours.screen
            assert (screen.cursor.y, screen.cursor.x) == (
                textual.screen.cursor.y,
                textual.screen.cursor.x,
            )


Cell = tuple[str, str]
"""A character (a wide one takes two cells) and its SGR sequence."""
NARROW = ["a", "b", "1", " ", "%", "│", "█", "▇"]
COLOURS = ["", RED, BLUE, BOLD_ITALIC, REVERSE]


@st.composite
def dashboard_row(draw: st.DrawFn, columns: int) -> list[Cell]:
    row: list[Cell] = []
    width = 0
    wide = draw(st.booleans())  # rows of one-cell characters only can be shifted
    while width < columns:
        char = draw(st.sampled_from([*NARROW, "漢"] if wide and width < columns - 1 else NARROW))
        row.append((char, draw(st.sampled_from(COLOURS))))
        width += 2 if char == "漢" else 1
    return row


@st.composite
def dashboard_frames(draw: st.DrawFn) -> list[tuple[tuple[int, int], list[list[Cell]]]]:
    """Screens, each a few cells away from the last (a figure's digits, a colour), some
    with a run of a row one cell to the left (a sparkline), once in a while a new size."""
    size = draw(st.sampled_from([(30, 6), (31, 5), (40, 7)]))
    screen = [draw(dashboard_row(size[0])) for _ in range(size[1])]
    frames = [(size, screen)]
    for _ in range(draw(st.integers(1, 7))):
        if draw(st.integers(0, 9)) == 0:
            size = draw(st.sampled_from([(30, 6), (31, 5), (40, 7)]))
            screen = [draw(dashboard_row(size[0])) for _ in range(size[1])]
        else:
            screen = [row[:] for row in screen]
            for _ in range(draw(st.integers(1, 12))):
                row = screen[draw(st.integers(0, size[1] - 1))]
                i = draw(st.integers(0, len(row) - 1))
                narrow = NARROW if row[i][0] != "漢" else ["漢"]
                row[i] = (draw(st.sampled_from(narrow)), draw(st.sampled_from(COLOURS)))
            if draw(st.booleans()):  # a run shifted left, a new cell at its end
                row = screen[draw(st.integers(0, size[1] - 1))]
                i = draw(st.integers(0, len(row) - 2))
                j = draw(st.integers(min(i + 6, len(row) - 1), len(row) - 1))
                if all(char != "漢" for char, _ in row[i : j + 1]):
                    row[i:j] = row[i + 1 : j + 1]
                    row[j] = (draw(st.sampled_from(NARROW)), row[j - 1][1])
        frames.append((size, screen))
    return frames


def textual_lines(screen: list[list[Cell]], before: list[list[Cell]] | None) -> str:
    """As Textual writes them: each changed line from its start, a segment a colour."""
    out = []
    for y, row in enumerate(screen):
        if before is not None and y < len(before) and before[y] == row:
            continue
        out.append(f"\x1b[{y + 1};1H")
        for char, sgr in row:
            out.append(f"{sgr}{char}\x1b[0m")
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(dashboard_frames(), st.booleans())
def test_a_dashboards_frames_show_what_textual_wrote(
    frames: list[tuple[tuple[int, int], list[list[Cell]]]], feeds: bool
) -> None:
    """Many small changes in several colours at once (so the cells of a colour are toured in
    an order of their own), wide characters, the last column, rows shifted, a resize: the
    terminal fed the diff shows, cell for cell, what the one fed Textual's frames shows."""
    diff = ScreenDiff()
    diff.line_feeds = feeds
    textual = ours = None
    before: list[list[Cell]] | None = None
    for size, screen in frames:
        if textual is None or (textual.screen.columns, textual.screen.lines) != size:
            textual, ours, before = Terminal(*size), Terminal(*size), None
        assert ours is not None
        data = textual_lines(screen, before) + HOME
        textual.feed(data)
        ours.feed(diff.filter(data, size))
        assert ours.cells == textual.cells
        before = screen


def test_a_resent_gap_is_too_short_to_hold_a_run_still_to_shift() -> None:
    """The runs of a colour go in any order (``tour``), so a gap may be resent before a
    shift on its row is sent; one holding a shifted run's cells would be shifted with them.
    A run shifts at least SHIFT_MIN_CELLS changed cells and ends in its new cell, which is
    never inside a gap, and no cursor is left inside a run still to shift: a gap holding
    any of it is at least SHIFT_MIN_CELLS + 1 cells long."""
    assert MERGE_GAP <= SHIFT_MIN_CELLS


@pytest.mark.parametrize("setting", [None, "", "1", "on"])
def test_textuals_terminal_driver_gets_the_screen_diff_by_default(setting: str | None) -> None:
    environ = {} if setting is None else {"GPUTOP_SCREEN_DIFF": setting}
    assert driver_with_screen_diff(LinuxDriver, environ) is DiffingLinuxDriver


@pytest.mark.parametrize("setting", ["0", "off", "no", "false", " OFF "])
def test_gputop_screen_diff_0_writes_as_textuals_own_driver(setting: str) -> None:
    """Written as Textual writes; read by the input thread that stops when the terminal goes
    away (``QuietInput``), which writes nothing of its own."""
    driver = driver_with_screen_diff(LinuxDriver, {"GPUTOP_SCREEN_DIFF": setting})
    assert driver is QuietInput
    assert "write" not in vars(QuietInput) and "flush" not in vars(QuietInput)


def test_other_drivers_are_kept() -> None:
    assert driver_with_screen_diff(HeadlessDriver, {}) is HeadlessDriver


# -- what the diff did, for the pty test to check (tests/tui/test_screen_diff_pty.py) ------------


def test_a_frame_of_every_cell_is_sent_whole_and_a_later_change_is_diffed() -> None:
    diff = ScreenDiff()
    every_cell = frame(*((y, 0, RED, "x" * SIZE[0]) for y in range(SIZE[1])))
    assert diff.filter(every_cell, SIZE) == every_cell
    assert diff.last_outcome == WHOLE
    diff.filter(frame((0, 0, RED, "y")), SIZE)
    assert diff.last_outcome == DIFFED


def test_a_sequence_the_diff_does_not_know_is_said_as_not_followed() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "GPU  93%")), SIZE)
    erase_line = "\x1b[1;1H\x1b[2KGPU  94%"  # Textual never writes EL; a new Textual might
    assert diff.filter(erase_line, SIZE) == "\x1b[0m" + erase_line
    assert diff.last_outcome == NOT_FOLLOWED
    # what the terminal shows was forgotten: the next frame's cells are all sent again
    assert "GPU  95%" in diff.filter(frame((0, 0, RED, "GPU  95%")), SIZE)


def test_modes_and_cursor_moves_are_passed_on_as_unchanged() -> None:
    diff = ScreenDiff()
    diff.filter(frame((0, 0, RED, "GPU")), SIZE)
    for data in ("\x1b[?25l", "\x1b[?2026$p", "\x1b[2;3H"):
        assert diff.filter(data, SIZE) == data
        assert diff.last_outcome == UNCHANGED


def test_a_cursor_move_is_sent_again_after_an_update_that_moved_the_cursor() -> None:
    # Found by the generated frames: a frame that ends with text (no cursor move) leaves the
    # terminal's cursor after it, so the same move as before must be sent again.
    diff = ScreenDiff()
    diff.filter(frame((0, 0, "", "a")) + "\x1b[4;1H", SIZE)
    assert diff.filter(frame((0, 0, "", "b")), SIZE) == "\x1b[1Hb"
    assert diff.filter(frame((0, 0, "", "b")) + "\x1b[4;1H", SIZE) == "\x1b[4;1H"
