"""Where the grid's cards go: how many columns fit, each card's place, and which cells of a
redrawn row changed (so the terminal is sent only those)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from rich.cells import cell_len
from textual.binding import Binding
from textual.strip import Strip

MIN_CARD_WIDTH = 38
CARD_KEYS = [
    Binding("left,k", "move(-1)", "Prev card", show=False),
    Binding("right,j", "move(1)", "Next card", show=False),
    Binding("up", "move_row(-1)", "Card above", show=False),
    Binding("down", "move_row(1)", "Card below", show=False),
]
"""The keys that move the highlight across the cards, in both dashboards' grids."""

Card = TypeVar("Card")
Place = tuple[tuple[int, int, int, int], Card]
"""A card and its place: x, y, width and height in the grid."""


def columns_for(count: int, width: int) -> int:
    """As many columns as cards of ``MIN_CARD_WIDTH`` fit, the rows then filled evenly."""
    count = max(count, 1)
    fit = max(1, width // MIN_CARD_WIDTH)
    if count <= fit:
        return count
    return math.ceil(count / math.ceil(count / fit))


def place(
    cards: Sequence[Card], width: int, compact: bool, columns: int, height: int
) -> tuple[list[Place[Card]], list[list[Place[Card]]]]:
    """Each card's place, and the places of each band (a row of cards). Columns share the
    width as Textual's ``fr`` units do: column ``k`` starts at ``floor(k * width / columns)``;
    one-line (``compact``) cards are one per line."""
    placed: list[Place[Card]] = []
    if compact:
        placed = [((0, row, width, 1), card) for row, card in enumerate(cards)]
    else:
        for position, card in enumerate(cards):
            row, column = divmod(position, columns)
            x = column * width // columns
            card_width = (column + 1) * width // columns - x
            placed.append(((x, row * height, card_width, height), card))
    bands: list[list[Place[Card]]] = []
    for where in placed:
        band = where[0][1] // where[0][3]
        while len(bands) <= band:
            bands.append([])
        bands[band].append(where)
    return placed, bands


def changed_span(before: Strip, after: Strip) -> tuple[int, int] | None:
    """The cells of ``after`` from its first segment that differs from ``before`` to its
    last (every changed cell is between them); None where the two are the same length and
    the same, or not the same length."""
    if before.cell_length != after.cell_length:
        return None
    old, new = list(before), list(after)
    first = 0
    left = 0
    while first < len(old) and first < len(new) and old[first] == new[first]:
        left += cell_len(old[first].text)
        first += 1
    if first == len(old) == len(new):
        return None
    right = after.cell_length
    last = 1
    while last <= min(len(old), len(new)) - first and old[-last] == new[-last]:
        right -= cell_len(new[-last].text)
        last += 1
    return (left, right) if left < right else None
