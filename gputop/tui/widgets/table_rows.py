"""What the process table and the jobs panel share: rebuilding keyed rows without losing the
row a person had highlighted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from textual.widgets import DataTable


def replace_rows(
    table: DataTable[Any],
    order: Sequence[str],
    cells: Mapping[str, tuple[Any, ...]],
    keep: str | None,
) -> None:
    """Rows ``order`` (keys) with their ``cells``; the cursor stays on row ``keep``."""
    table.clear()
    for key in order:
        table.add_row(*cells[key], key=key)
    if keep is not None and keep in order:
        table.move_cursor(row=list(order).index(keep), animate=False)
