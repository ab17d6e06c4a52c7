"""The process tables' order: sorted by what is shown, and held still while readings move.

A table sorted by a reading that moves every second (a process's GPU memory as its allocator
grows and shrinks, its SM %) would reorder its rows every second if it sorted by the reading
itself: two training ranks showing 44.2G and 44.3G trade places on every tick, the eye
cannot follow a row, and every swap repaints two whole lines. So a row *passes* another
only when its shown value is **clearly larger** (in a descending sort; clearly smaller in
an ascending one): larger by more than the column's ``Margin``, for GPU memory 5 % of the
smaller value. Rows whose values are within the margin of each other keep the order they
had; rows that come are put where their value belongs, rows that go leave the others in
their order. The order is still the one the title says: no row ever sits above one whose
shown value is clearly larger (the tests' ``is_held_order``).

``held_order`` is the whole rule, a pure function of the last order and the values now
(the widgets keep the last order and draw): the rows are taken in the last order, and each
goes below those placed before it, unless it is clearly larger than one of them; then it
goes just above the topmost of those. Where the last order is still allowed by the values
now, that is the last order itself (nothing moves); a row that has become clearly larger
than some above it moves up past them, the others keep their order. With no margin
(``EXACT``) the same rule is a plain stable sort (an insertion sort), ties in the last
order: what a change of sort column, ``S`` and ``o`` (re-sort now) give.

A value is a pair: a part compared exactly (the card, for the "GPU" column; a user's name,
a pid) and an amount with the margin (memory, a percentage; never negative), each in its own
direction (the "GPU" column: cards in order, on each the most memory first). "Clearly
larger" is, for a margin of ``absolute``, ``relative`` and a ``coarse`` step, ``a > b +
max(absolute, relative * b, the step where b is past its start)``: a strict order whose
every chain stays clear (if a is clearly larger than b and b than c, then a is than c), so
such an order always exists; and since that limit never falls as ``b`` grows, a row is
clearly larger than some placed row exactly when it is than the smallest placed, so a row
that passes nobody costs one comparison.

Docs: docs/reference.md ("The process table's order"), docs/speed.md.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, TypeVar

from gputop.core.records import frozen

K = TypeVar("K", bound=Hashable)

Value = tuple[Any, float]
"""What a row is sorted by: a part compared exactly, then an amount compared with a margin."""


@frozen
class Margin:
    """How much more than another's an amount must be to be clearly larger."""

    absolute: float = 0.0
    relative: float = 0.0
    """A share of the smaller amount (0.05: 5 % more)."""
    coarse: tuple[float, float] = (0.0, 0.0)
    """From an amount on, a step the column shows no finer (sizes from 1 GiB, shown to
    0.1 GiB): a row passes another by more than one such step at least."""

    def clearly_larger(self, a: float, b: float) -> bool:
        """``a`` is larger than ``b`` by more than the margin."""
        return a > self.limit(b)

    def limit(self, b: float) -> float:
        """The amount above which another is clearly larger than ``b`` (amounts are never
        negative); never below ``b``, and never less for a larger ``b``: what keeps every
        chain clear."""
        start, step = self.coarse
        return b + max(self.absolute, self.relative * b, step if step and b >= start else 0.0)


EXACT = Margin()
"""Any difference is clear: a plain sort."""


def clearly_before(
    a: Value, b: Value, margin: Margin, descending: bool, amounts_descending: bool | None = None
) -> bool:
    """A row valued ``a`` must sit above one valued ``b``. ``descending``: the largest
    first; the amounts in ``amounts_descending``'s direction where it is given (the GPU
    column: cards in order, on each the most memory first)."""
    if a[0] != b[0]:
        return (a[0] > b[0]) if descending else (a[0] < b[0])
    if descending if amounts_descending is None else amounts_descending:
        return margin.clearly_larger(a[1], b[1])
    return margin.clearly_larger(b[1], a[1])


def held_order(
    previous: Iterable[K],
    values: Mapping[K, Value],
    margin: Margin,
    descending: bool,
    amounts_descending: bool | None = None,
) -> list[K]:
    """The rows of ``values`` in order, moving as few as the values now require.

    ``previous`` is the last order (keys no longer in ``values`` are rows gone); keys of
    ``values`` not in it are rows come, placed where their value belongs (several in the
    order of ``values`` where they tie). The exact parts go in ``descending``'s direction,
    the amounts in ``amounts_descending``'s (the same where it is None). See the module's
    docstring for the rule.
    """
    down = descending if amounts_descending is None else amounts_descending
    before = dict.fromkeys(previous)  # each key once, first where it came
    last: list[K] = [key for key in before if key in values]
    new = [key for key in values if key not in before]
    if new:
        last = _placed(last, new, values, descending, down)
    # The exact parts first (a stable sort keeps the last order within each), then the
    # amounts within each run of one exact part.
    exact = {key: value[0] for key, value in values.items()}
    last.sort(key=exact.__getitem__, reverse=descending)
    ordered: list[K] = []
    start = 0
    while start < len(last):
        group = exact[last[start]]
        end = start + 1
        while end < len(last) and exact[last[end]] == group:
            end += 1
        ordered.extend(_held_run(last[start:end], values, margin, down))
        start = end
    return ordered


def _placed(
    last: list[K], new: list[K], values: Mapping[K, Value], descending: bool, down: bool
) -> list[K]:
    """``last`` with each of ``new`` put above the first row it sorts before exactly (one
    merge: the new rows sorted, each row of ``last`` preceded by those not yet placed that
    sort before it)."""
    coming = sorted(new, key=lambda k: values[k][1], reverse=down)
    coming.sort(key=lambda k: values[k][0], reverse=descending)
    out: list[K] = []
    taken = 0
    for key in last:
        value = values[key]
        while taken < len(coming) and clearly_before(
            values[coming[taken]], value, EXACT, descending, down
        ):
            out.append(coming[taken])
            taken += 1
        out.append(key)
    out.extend(coming[taken:])
    return out


def _held_run(run: list[K], values: Mapping[K, Value], margin: Margin, descending: bool) -> list[K]:
    """One run of equal exact parts, taken in the last order: each row goes below those
    placed before it, unless it must sit above one of them (it is clearly larger than it,
    descending; clearly smaller, ascending); then it goes just above the topmost such."""
    if len(run) < 2:
        return run
    limit = margin.limit
    first = values[run[0]][1]
    out: list[K] = [run[0]]
    if descending:
        # Each placed row's limit, worked out once: a row above one is clearly larger.
        limits = [limit(first)]
        bound = limits[0]  # the smallest placed row's: above it, clearly larger than one
        for key in run[1:]:
            amount = values[key][1]
            mine = limit(amount)
            if amount > bound:
                at = next(i for i, other in enumerate(limits) if amount > other)
                out.insert(at, key)
                limits.insert(at, mine)
                continue
            out.append(key)
            limits.append(mine)
            if mine < bound:  # a smaller amount: a lower limit (limit never falls as b grows)
                bound = mine
        return out
    amounts = [first]
    extreme = first  # the largest amount placed
    for key in run[1:]:
        amount = values[key][1]
        mine = limit(amount)
        if extreme > mine:  # clearly smaller than one placed
            at = next(i for i, other in enumerate(amounts) if other > mine)
            out.insert(at, key)
            amounts.insert(at, amount)
        else:
            out.append(key)
            amounts.append(amount)
        if amount > extreme:
            extreme = amount
    return out


class HeldOrder:
    """The last order of one table, and whether the next must be a plain sort.

    ``order`` gives the rows in the held order; ``resort`` makes the next one exact (a
    plain stable sort, ties where they were): the table's ``o``, and any change of sort
    column or direction.
    """

    def __init__(self) -> None:
        self._last: list[Any] = []
        self._exact = True
        self._how: tuple[object, ...] | None = None

    def resort(self) -> None:
        self._exact = True

    def order(
        self,
        values: Mapping[K, Value],
        margin: Margin,
        descending: bool,
        how: tuple[object, ...] = (),
        amounts_descending: bool | None = None,
    ) -> list[K]:
        """``values``' keys in order (``held_order``); ``how`` names the sort (column and
        direction): when it differs from the last call's, the order is a plain sort again."""
        if how != self._how:
            self._how = how
            self._exact = True
        exact, self._exact = self._exact, False
        order = held_order(
            self._last, values, EXACT if exact else margin, descending, amounts_descending
        )
        self._last = list(order)
        return order
