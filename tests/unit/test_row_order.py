"""The process tables' order rule (gputop/tui/row_order.py), a pure function, tested alone."""

from __future__ import annotations

import random

from helpers.row_order import is_held_order
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.tui.row_order import (
    EXACT,
    HeldOrder,
    Margin,
    Value,
    clearly_before,
    held_order,
)

FIVE_PERCENT = Margin(absolute=1.0, relative=0.05)
MARGINS = st.sampled_from([EXACT, FIVE_PERCENT, Margin(absolute=10), Margin(relative=0.2)])
KEYS = st.integers(0, 14)
AMOUNTS = st.one_of(
    st.integers(-50, 200).map(float),
    st.floats(0, 1e12, allow_nan=False, allow_infinity=False),
)
VALUES = st.tuples(st.sampled_from([(), (0,), (1,), (2,)]), AMOUNTS)
UPDATES = st.lists(st.dictionaries(KEYS, VALUES, max_size=12), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(UPDATES, MARGINS, st.booleans())
def test_after_any_updates_no_row_sits_above_one_clearly_larger(
    updates: list[dict[int, Value]], margin: Margin, descending: bool
) -> None:
    """Whatever came before, rows came, went and moved: every row is there once, and no row
    sits above one that is clearly larger (clearly smaller, ascending)."""
    order: list[int] = []
    for values in updates:
        order = held_order(order, values, margin, descending)
        assert sorted(order) == sorted(values)
        for i, upper in enumerate(order):
            for lower in order[i + 1 :]:
                assert not clearly_before(values[lower], values[upper], margin, descending)
        assert is_held_order(order, values, margin, descending)


NEAR = st.lists(
    st.dictionaries(st.integers(0, 7), st.integers(90, 125).map(float), min_size=2, max_size=8),
    min_size=2,
    max_size=15,
)


@settings(max_examples=150, deadline=None)
@given(
    NEAR, st.sampled_from([FIVE_PERCENT, Margin(relative=0.05), Margin(absolute=10)]), st.booleans()
)
def test_rows_near_one_another_never_sit_above_one_clearly_larger(
    updates: list[dict[int, float]], margin: Margin, descending: bool
) -> None:
    """Amounts within a few margins of one another, as a job's ranks are: chains form (a
    row not clearly larger than the one above it, but than the one above that)."""
    order: list[int] = []
    for amounts in updates:
        values = {key: ((), amount) for key, amount in amounts.items()}
        order = held_order(order, values, margin, descending)
        assert sorted(order) == sorted(values)
        assert is_held_order(order, values, margin, descending)


@settings(max_examples=150, deadline=None)
@given(UPDATES, MARGINS, st.booleans())
def test_an_order_the_values_still_allow_is_kept_as_it_is(
    updates: list[dict[int, Value]], margin: Margin, descending: bool
) -> None:
    """Where no row has become clearly larger than one above it, nothing moves."""
    order: list[int] = []
    for values in updates:
        kept = [key for key in order if key in values]
        if set(kept) == set(values) and is_held_order(kept, values, margin, descending):
            assert held_order(order, values, margin, descending) == kept
        order = held_order(order, values, margin, descending)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=12), st.permutations(range(15)), st.booleans())
def test_with_no_margin_the_rule_is_a_stable_sort_ties_in_the_last_order(
    values: dict[int, Value], last: list[int], descending: bool
) -> None:
    expected = sorted(
        sorted(values, key=last.index), key=lambda key: values[key], reverse=descending
    )
    assert held_order(last, values, EXACT, descending) == expected


def test_small_jitter_reorders_nothing_over_30_updates_a_real_change_at_once() -> None:
    """Forty rows in groups of near-equal sizes (MiB: ranks of one job at 44000 to 44280,
    then groups of 8000, 10000, 12000, 14000), each moving by up to 2 % an update: 30
    updates, not one reorder. Then one of 8000 grows to 12800: it moves above every row it
    is now clearly larger than, in that same update, and no further."""
    rng = random.Random(7)
    sizes = {k: 44000.0 + 40 * k if k < 8 else 6000.0 + 2000 * (k // 8) for k in range(40)}
    order = held_order([], {k: ((), v) for k, v in sizes.items()}, FIVE_PERCENT, True)
    first = list(order)
    moves = 0
    for _ in range(30):
        values = {k: ((), v * (1 + rng.uniform(-0.02, 0.02))) for k, v in sizes.items()}
        new = held_order(order, values, FIVE_PERCENT, True)
        moves += new != order
        order = new
    assert moves == 0 and order == first

    grown = order[-1]  # the smallest group's last row
    values = {k: ((), v) for k, v in sizes.items()}
    values[grown] = ((), 12800.0)
    moved = held_order(order, values, FIVE_PERCENT, True)
    assert moved != order and is_held_order(moved, values, FIVE_PERCENT, True)
    above = moved[: moved.index(grown)]
    assert all(not FIVE_PERCENT.clearly_larger(values[grown][1], values[k][1]) for k in above)
    assert FIVE_PERCENT.clearly_larger(values[grown][1], values[moved[moved.index(grown) + 1]][1])


def test_a_row_passes_a_neighbour_only_past_the_margin_and_ties_keep_their_place() -> None:
    assert held_order([1, 2], {1: ((), 100.0), 2: ((), 104.0)}, FIVE_PERCENT, True) == [1, 2]
    assert held_order([1, 2], {1: ((), 100.0), 2: ((), 106.0)}, FIVE_PERCENT, True) == [2, 1]
    assert held_order([2, 1], {1: ((), 104.0), 2: ((), 100.0)}, FIVE_PERCENT, True) == [2, 1]
    assert held_order([2, 1], {1: ((), 7.0), 2: ((), 7.0)}, FIVE_PERCENT, True) == [2, 1]
    # Ascending: a row passes one above it only when clearly smaller.
    assert held_order([1, 2], {1: ((), 104.0), 2: ((), 100.0)}, FIVE_PERCENT, False) == [1, 2]
    assert held_order([1, 2], {1: ((), 106.0), 2: ((), 100.0)}, FIVE_PERCENT, False) == [2, 1]


def test_a_row_that_comes_goes_where_its_value_belongs() -> None:
    values = {1: ((), 50.0), 2: ((), 30.0), 3: ((), 10.0), 9: ((), 31.0)}
    assert held_order([1, 2, 3], values, FIVE_PERCENT, True) == [1, 9, 2, 3]
    assert held_order([1, 2, 3], {1: ((), 50.0), 3: ((), 10.0)}, FIVE_PERCENT, True) == [1, 3]


def test_the_exact_part_is_never_held() -> None:
    """The GPU column: the card exactly, then memory within a card with the margin."""
    values = {1: ((0,), 100.0), 2: ((1,), 300.0), 3: ((0,), 102.0)}
    assert held_order([2, 1, 3], values, FIVE_PERCENT, False, True) == [1, 3, 2]
    values[3] = ((0,), 110.0)
    assert held_order([1, 3, 2], values, FIVE_PERCENT, False, True) == [3, 1, 2]
    assert is_held_order([3, 1, 2], values, FIVE_PERCENT, False, True)
    assert not is_held_order([1, 3, 2], values, FIVE_PERCENT, False, True)


def test_a_held_order_sorts_exactly_when_asked_or_when_the_sort_changes() -> None:
    held = HeldOrder()
    values = {1: ((), 100.0), 2: ((), 103.0)}
    assert held.order(values, FIVE_PERCENT, True, ("memory", False)) == [2, 1]  # the first
    values = {1: ((), 103.0), 2: ((), 100.0)}
    assert held.order(values, FIVE_PERCENT, True, ("memory", False)) == [2, 1]  # held
    held.resort()
    assert held.order(values, FIVE_PERCENT, True, ("memory", False)) == [1, 2]  # exact
    values = {1: ((), 100.0), 2: ((), 103.0)}
    assert held.order(values, FIVE_PERCENT, True, ("memory", False)) == [1, 2]  # held again
    assert held.order(values, FIVE_PERCENT, False, ("memory", True)) == [1, 2]  # reversed
    assert held.order(values, FIVE_PERCENT, True, ("memory", False)) == [2, 1]
