"""The screen diff's cursor moves: each lands where it is meant to on a real terminal
emulator, its cost is its length, and a colour's runs are toured with few bytes."""

from __future__ import annotations

import pyte
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.tui.screen_moves import move, move_cost, tour

COLUMNS, ROWS = 12, 14


def test_the_cost_of_every_move_on_a_small_screen_is_its_length() -> None:
    for feeds in (False, True):
        for row in range(-1, ROWS):
            for column in range(COLUMNS + 1):  # the last: waiting to wrap
                for y in range(ROWS):
                    for x in range(COLUMNS):
                        expected = len(move(y, x, row, column, COLUMNS, feeds))
                        assert move_cost(y, x, row, column, COLUMNS, feeds) == expected


@settings(max_examples=500, deadline=None)
@given(
    st.integers(0, 1100),
    st.integers(0, 1100),
    st.integers(-1, 1100),
    st.integers(0, 1101),
    st.booleans(),
)
def test_the_cost_of_a_move_on_a_large_screen_is_its_length(
    y: int, x: int, row: int, column: int, feeds: bool
) -> None:
    columns = 1101
    assert move_cost(y, x, row, column, columns, feeds) == len(
        move(y, x, row, column, columns, feeds)
    )


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, 39),
    st.integers(0, 119),
    st.integers(0, 39),
    st.integers(0, 119),
    st.booleans(),
)
def test_every_move_puts_the_cursor_where_it_was_asked_to(
    y: int, x: int, row: int, column: int, feeds: bool
) -> None:
    """pyte keeps line feeds as they are (a line feed moves down, as with ONLCR off)."""
    screen = pyte.Screen(120, 40)
    stream = pyte.Stream(screen)
    stream.feed(f"\x1b[{row + 1};{column + 1}H")
    stream.feed(move(y, x, row, column, 120, feeds))
    assert (screen.cursor.y, screen.cursor.x) == (y, x)


def test_one_row_up_is_a_reverse_index_and_a_far_column_is_named() -> None:
    assert move(4, 30, 5, 30, 200) == "\x1bM"  # two bytes, where CUU is three
    assert move(4, 29, 5, 30, 200) == "\x1bM\b"
    assert move(5, 4, 5, 130, 200) == "\x1b[5G"  # the column (CHA), not 126 back
    assert move(5, 126, 5, 4, 200) == "\x1b[122C"  # as long as the column: the step
    assert move(6, 4, 5, 130, 200, feeds=True) == "\n\x1b[5G"


def test_a_column_of_a_table_is_toured_down_before_the_next_column() -> None:
    """Two columns of one colour changed on five rows: in screen order each row costs a step
    right and a line feed with a long step back; the tour goes down each column."""
    runs = [(y, x, x + 2) for y in range(20, 25) for x in (30, 40)]
    order = tour(runs, (-1, -1), 200, feeds=True)
    assert [runs[i][1] for i in order] == [30] * 5 + [40] * 5
    assert [runs[i][0] for i in order] == [*range(20, 25), *range(20, 25)]


runs_on_a_screen = st.lists(
    st.tuples(st.integers(0, 29), st.integers(0, 118), st.integers(1, 4)),
    min_size=1,
    max_size=40,
    unique_by=lambda run: (run[0], run[1]),
).map(lambda runs: [(y, x, min(x + width, 120)) for y, x, width in sorted(runs)])


@settings(max_examples=300, deadline=None)
@given(runs_on_a_screen, st.integers(-1, 29), st.integers(0, 120), st.booleans())
def test_a_tour_visits_every_run_once_and_costs_no_more_than_screen_order(
    runs: list[tuple[int, int, int]], row: int, column: int, feeds: bool
) -> None:
    cursor = (row, column if row >= 0 else -1)
    order = tour(runs, cursor, 120, feeds)
    assert sorted(order) == list(range(len(runs)))

    def cost(order: list[int]) -> int:
        total, (y, x) = 0, cursor
        for index in order:
            total += len(move(runs[index][0], runs[index][1], y, x, 120, feeds))
            y, x = runs[index][0], runs[index][2]
        return total

    assert cost(order) <= cost(list(range(len(runs))))


def test_a_links_cost_is_the_moves_cost_wherever_tour_would_take_it() -> None:
    """``tour`` works out the cost of a link in place (``_link_cost``, with the absolute move
    to a first column of the first nine rows): it must keep exactly the links, and their
    costs, that ``move_cost`` would (at most ``LINK_MAX`` bytes), for every row step it
    looks at, with and without line feeds, from any column of the row to any entry."""
    from gputop.tui.screen_moves import LINK_MAX, LINK_ROWS, _link_cost, _vertical

    columns = 130
    for feeds in (False, True):
        for y in (0, 5, 7, 8, 9, 10, 60):
            for down in LINK_ROWS:
                vertical = _vertical(down, feeds)
                for leave in range(0, columns):
                    near = range(max(leave - 12, 0), min(leave + 13, columns))
                    for entry in {*range(12), *near, 98, 99, 100, columns - 1}:
                        expected = move_cost(y + down, entry, y, leave, columns, feeds)
                        cost = _link_cost(vertical, entry, leave)
                        if cost > LINK_MAX and not entry and y + down < 9:
                            cost = LINK_MAX
                        assert (cost <= LINK_MAX) == (expected <= LINK_MAX), (y, down, leave)
                        if expected <= LINK_MAX:
                            assert cost == expected, (feeds, y, down, leave, entry)
