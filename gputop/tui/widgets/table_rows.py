"""Rebuilding a DataTable's keyed rows without losing the row a person had highlighted.

The jobs panel's (the process table owns its rows, see ``process_table.py``). A DataTable
reads a plain ``str`` cell as markup; cells arrive here as ``Text`` or are made so, their
text cleaned, so a job name or log line is never markup (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from textual.widgets import DataTable

from gputop.tui.safe import plain


def replace_rows(
    table: DataTable[Any],
    order: Sequence[str],
    cells: Mapping[str, tuple[Any, ...]],
    keep: str | None,
) -> None:
    """Rows ``order`` (keys) with their ``cells``; the cursor stays on row ``keep``."""
    table.clear()
    for key in order:
        table.add_row(*(plain(v) if isinstance(v, str) else v for v in cells[key]), key=key)
    if keep is not None and keep in order:
        table.move_cursor(row=list(order).index(keep), animate=False)
