"""A series drawn as a column chart a few rows high, with its scale and its time axis, for the
history screens (``H``; docs/history.md, "In the dashboard").

Each column is one slice of the window; a column's height is its value against ``top`` in
eighths of a row (the block characters of the sparklines, stacked), so a 4-row plot tells 32
levels apart where a sparkline tells 8. A slice with nothing recorded is ``GAP`` on the
bottom row and blank above it, and a value above zero never draws as nothing. Plain strings:
the caller styles them; nothing here comes from a user.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gputop.core.history.series import BLOCKS, GAP

AXIS = "┤"
"""Between a row's scale label and its columns."""


def column_rows(values: Sequence[float | None], top: float | None, height: int) -> list[str]:
    """``height`` rows of one cell a value, the top row first."""
    eighths_per_row = len(BLOCKS) - 1
    filled: list[int | None] = []
    for value in values:
        if value is None or not top:
            filled.append(None)
        else:
            share = min(1.0, max(0.0, value / top))
            filled.append(max(1 if share > 0 else 0, round(share * height * eighths_per_row)))
    rows = []
    for row in reversed(range(height)):
        cells = []
        for eighths in filled:
            if eighths is None:
                cells.append(GAP if row == 0 else " ")
            else:
                level = min(eighths_per_row, max(0, eighths - row * eighths_per_row))
                cells.append(BLOCKS[level])
        rows.append("".join(cells))
    return rows


def labelled_plot(
    values: Sequence[float | None],
    top: float | None,
    height: int,
    label: Callable[[float], str],
    label_width: int,
) -> list[str]:
    """``column_rows`` with the scale on the left: ``top`` by the top row, 0 by the bottom."""
    rows = column_rows(values, top, height)
    lines = []
    for number, row in enumerate(rows):
        if top and number == 0:
            scale = label(top)
        elif number == len(rows) - 1:
            scale = label(0.0)
        else:
            scale = ""
        lines.append(f"{scale:>{label_width}}{AXIS}{row}")
    return lines


def time_axis(since: float, until: float, columns: int, indent: int) -> str:
    """Below the columns: how long before the window's end each end and the middle are
    (``-1h``, ``-30m``, ``now``), so the axis needs no clock or time zone to read."""
    width = max(columns, 1)
    left = f"-{_ago(until - since)}"
    middle = f"-{_ago((until - since) / 2)}"
    right = "now"
    axis = [" "] * width
    _put(axis, 0, left)
    _put(axis, width // 2 - len(middle) // 2, middle)
    _put(axis, width - len(right), right)
    return " " * (indent + 1) + "".join(axis).rstrip()


def _put(cells: list[str], at: int, text: str) -> None:
    at = max(0, min(at, len(cells) - len(text)))
    if at < 0 or any(cell != " " for cell in cells[max(0, at - 1) : at + len(text) + 1]):
        return  # too narrow for this label beside the others
    cells[at : at + len(text)] = list(text)


def _ago(seconds: float) -> str:
    """``7d``, ``12h``, ``30m``, ``90s``: the largest whole unit."""
    seconds = max(0.0, seconds)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size and seconds % size < 1:
            return f"{seconds / size:.0f}{unit}"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
