"""What the local and the lab jobs panels share: keyed rows, the highlighted job, the keys.

A subclass says what a job is (``Job`` here, ``HostJob`` in the lab) and hands ``put_rows``
its rows in order (``enter`` and ``K`` post ``LogRequested`` / ``StopRequested``, handled as
``on_jobs_table_*``: each app has one jobs panel); rows are rebuilt only when the order changes,
otherwise only the cells that changed are updated.

A job's name is the user's and can be of any length: it is cut with an ellipsis to what the
table's width leaves it, so that the status and every column after it always show (at 80
columns, and beside the PyTorch view).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from gputop.core.records import mutable
from gputop.tui.safe import plain

J = TypeVar("J")

NAME_COLUMN = "NAME"
MIN_NAME_CELLS = 10
"""A name is never cut shorter than this (``resnet50-…``), even where columns then go off
the right edge."""


@mutable
class JobRequest(Message, Generic[J]):
    """A person asked something of a job (its log, to stop it)."""

    job: J


def replace_rows(
    table: DataTable[Any],
    order: Sequence[str],
    cells: Mapping[str, tuple[Any, ...]],
    keep: str | None,
) -> None:
    """Rows ``order`` (keys) with their ``cells``; the cursor stays on row ``keep``. A
    DataTable reads a ``str`` cell as markup: a cell given as one is cleaned and made
    ``Text``, so that a job name or log line is never markup (docs/security.md)."""
    table.clear()
    for key in order:
        table.add_row(*(plain(v) if isinstance(v, str) else v for v in cells[key]), key=key)
    if keep is not None and keep in order:
        table.move_cursor(row=list(order).index(keep), animate=False)


class JobsTable(DataTable[Any], Generic[J]):
    BINDINGS = [
        Binding("enter", "show_log", "Log"),
        Binding("K", "stop_job", "Stop job"),
    ]

    class LogRequested(JobRequest[Any]):
        pass

    class StopRequested(JobRequest[Any]):
        pass

    ROOM_AFTER = 0
    """Cells kept free after the last fixed column for a last column of free text (the local
    panel's last log line), before the name gets them."""

    def __init__(self, columns: Sequence[str], title: str, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._columns = tuple(columns)
        self._title = title
        self._jobs: dict[str, J] = {}
        self._order: list[str] = []
        self._cells: dict[str, tuple[Any, ...]] = {}
        self._to_highlight: str | None = None
        """A job to highlight once it is shown (the one just launched)."""
        self._given: tuple[dict[str, J], Mapping[str, tuple[Any, ...]], str] | None = None
        """The rows last given, names uncut: shown again, cut anew, when the width changes."""
        self._name_room: int | None = None

    def on_mount(self) -> None:
        self.border_title = self._title
        self._add_columns()

    def _add_columns(self) -> None:
        """The columns, once: on mount, or at the first rows if they come before it (the
        local panel is mounted when first needed, and given its rows at once)."""
        if self.columns:
            return
        for name in self._columns:
            # A Text label: a str one is read as markup, and its first read of markup loads
            # Rich's emoji table (about 16M instructions before the first frame).
            self.add_column(Text(name), key=name)

    @property
    def current_job(self) -> J | None:
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._jobs.get(self._order[self.cursor_row])

    def highlight(self, key: str) -> None:
        """Move the highlight to job ``key`` now, or as soon as a later ``put_rows`` shows it:
        after a launch, ``enter`` and ``K`` act on the job just launched."""
        self._to_highlight = key
        self._highlight_pending()

    def _highlight_pending(self) -> None:
        key = self._to_highlight
        if key is not None and key in self._order:
            self._to_highlight = None
            self.move_cursor(row=self._order.index(key), animate=False)

    def on_resize(self) -> None:
        if self._given is not None and self._name_cells(self._given[1]) != self._name_room:
            self.put_rows(*self._given)

    def _name_cells(self, cells: Mapping[str, tuple[Any, ...]]) -> int | None:
        """The most cells a name may take at this width; None where names need no cut."""
        width = self.scrollable_content_region.width
        if not width or NAME_COLUMN not in self._columns:
            return None
        name = self._columns.index(NAME_COLUMN)
        padding = 2 * self.cell_padding
        widths = [cell_len(label) for label in self._columns]
        for values in cells.values():
            for column, value in enumerate(values[: len(widths)]):
                text = value.plain if isinstance(value, Text) else str(value)
                widths[column] = max(widths[column], cell_len(text))
        last = len(widths) - 1 if self.ROOM_AFTER else len(widths)
        others = sum(w + padding for c, w in enumerate(widths[:last]) if c != name)
        room = width - others - padding - min(self.ROOM_AFTER, widths[-1] + padding)
        return max(MIN_NAME_CELLS, room) if room < widths[name] else None

    def _cut_names(
        self, cells: Mapping[str, tuple[Any, ...]], room: int | None
    ) -> dict[str, tuple[Any, ...]]:
        if room is None:
            return dict(cells)
        name = self._columns.index(NAME_COLUMN)
        cut: dict[str, tuple[Any, ...]] = {}
        for key, values in cells.items():
            value = values[name] if name < len(values) else None
            if isinstance(value, Text) and value.cell_len > room:
                value = value.copy()
                value.truncate(room, overflow="ellipsis")
                values = (*values[:name], value, *values[name + 1 :])
            cut[key] = values
        return cut

    def put_rows(
        self, jobs: dict[str, J], cells: Mapping[str, tuple[Any, ...]], subtitle: str
    ) -> None:
        """Show ``cells`` (keyed rows, in order; a key without a job is shown, not acted on)."""
        self._add_columns()
        self._given = (jobs, cells, subtitle)
        self._name_room = self._name_cells(cells)
        cells = self._cut_names(cells, self._name_room)
        order = list(cells)
        keep = self._order[self.cursor_row] if self.current_job is not None else None
        self._jobs = jobs
        if order != self._order:
            replace_rows(self, order, cells, keep)
            self._order = order
        else:
            for key, values in cells.items():
                old = self._cells.get(key)
                for column, value in enumerate(values):
                    if old is None or old[column] != value:
                        self.update_cell(key, self._columns[column], value, update_width=True)
        self._cells = dict(cells)
        self._highlight_pending()
        if subtitle != self.border_subtitle:  # setting it, even to itself, repaints
            self.border_subtitle = subtitle

    def action_show_log(self) -> None:
        if (job := self.current_job) is not None:
            self.post_message(self.LogRequested(job))

    def action_stop_job(self) -> None:
        if (job := self.current_job) is not None:
            self.post_message(self.StopRequested(job))
