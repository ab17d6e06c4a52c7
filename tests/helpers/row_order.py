"""What every held order must be: no row above one that must sit above it."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from gputop.tui.row_order import Margin, Value, clearly_before

K = TypeVar("K", bound=Hashable)


def is_held_order(
    order: Sequence[K],
    values: Mapping[K, Value],
    margin: Margin,
    descending: bool,
    amounts_descending: bool | None = None,
) -> bool:
    """No row sits above one that must sit above it (quadratic: for tests and checks)."""
    return not any(
        clearly_before(values[order[j]], values[order[i]], margin, descending, amounts_descending)
        for i in range(len(order))
        for j in range(i + 1, len(order))
    )
