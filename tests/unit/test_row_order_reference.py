"""``held_order`` gives the order its first implementation gave, for any last order and values
(the rule is tested in test_row_order.py; this keeps a faster implementation to the same
answers, ties and repeated keys included)."""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from gputop.tui.row_order import EXACT, Margin, Value, _placed, held_order


def _old_held_order(
    previous: Iterable[Hashable],
    values: Mapping[Any, Value],
    margin: Margin,
    descending: bool,
    amounts_descending: bool | None = None,
) -> list[Any]:
    """The implementation before the cached bound and the exact parts' table."""
    down = descending if amounts_descending is None else amounts_descending
    seen = set()
    last: list[Any] = []
    for key in previous:
        if key in values and key not in seen:
            seen.add(key)
            last.append(key)
    new = [key for key in values if key not in seen]
    if new:
        last = _placed(last, new, values, descending, down)
    last.sort(key=lambda key: values[key][0], reverse=descending)
    ordered: list[Any] = []
    start = 0
    while start < len(last):
        group = values[last[start]][0]
        end = start + 1
        while end < len(last) and values[last[end]][0] == group:
            end += 1
        ordered.extend(_old_held_run(last[start:end], values, margin, down))
        start = end
    return ordered


def _old_held_run(
    run: list[Any], values: Mapping[Any, Value], margin: Margin, descending: bool
) -> list[Any]:
    if len(run) < 2:
        return run
    out: list[Any] = []
    amounts: list[float] = []
    extreme = 0.0
    limit = margin.limit
    for key in run:
        amount = values[key][1]
        if not out:
            extreme = amount
        elif descending and amount > limit(extreme):
            at = next(i for i, other in enumerate(amounts) if amount > limit(other))
            out.insert(at, key)
            amounts.insert(at, amount)
            continue
        elif not descending and extreme > limit(amount):
            at = next(i for i, other in enumerate(amounts) if other > limit(amount))
            out.insert(at, key)
            amounts.insert(at, amount)
            extreme = max(extreme, amount)
            continue
        out.append(key)
        amounts.append(amount)
        extreme = min(extreme, amount) if descending else max(extreme, amount)
    return out


MARGINS = (
    EXACT,
    Margin(absolute=1.0, relative=0.05),
    Margin(absolute=10),
    Margin(relative=0.2),
    Margin(absolute=2**20, relative=0.05, coarse=(2.0**30, 0.25 * 2**30)),
)


def _amount(rng: random.Random) -> float:
    kind = rng.randrange(4)
    if kind == 0:
        return float(rng.randrange(0, 12))  # many ties
    if kind == 1:
        return rng.choice([0.0, 10.0, 10.5, 11.0, 2.0**30, 1.25 * 2**30, 1.3 * 2**30])
    if kind == 2:
        return rng.uniform(0, 100)
    return rng.uniform(0, 2e11)


def test_the_same_order_as_the_first_implementation_for_many_random_updates() -> None:
    rng = random.Random(44)
    for _ in range(3_000):
        margin = rng.choice(MARGINS)
        descending = rng.random() < 0.5
        amounts_descending = rng.choice([None, True, False])
        exacts = rng.choice([[()], [(0,), (1,)], [(0,), (1,), (2,), (3,)]])
        last: list[int] = []
        for _ in range(rng.randrange(1, 6)):
            keys = rng.sample(range(60), rng.randrange(0, 40))
            values = {key: (rng.choice(exacts), _amount(rng)) for key in keys}
            previous = last + rng.sample(range(60), rng.randrange(0, 4))  # gone, repeated
            want = _old_held_order(previous, values, margin, descending, amounts_descending)
            got = held_order(previous, values, margin, descending, amounts_descending)
            assert got == want, (previous, values, margin, descending, amounts_descending)
            last = got
