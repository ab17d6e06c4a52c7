"""What the local and the lab jobs panels share: keyed rows, the highlighted job, the keys.

A subclass says what a job is (``Job`` here, ``RemoteJob`` in the lab), declares its own
``LogRequested`` / ``StopRequested`` messages (handlers are named after the panel), and
hands ``put_rows`` its rows in order; rows are rebuilt only when the order changes,
otherwise only the cells that changed are updated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from gputop.tui.widgets.table_rows import replace_rows

J = TypeVar("J")


class JobRequest(Message, Generic[J]):
    """A person asked something of a job (its log, to stop it)."""

    def __init__(self, job: J) -> None:
        super().__init__()
        self.job = job


class JobsTable(DataTable[Any], Generic[J]):
    BINDINGS = [
        Binding("enter", "show_log", "Log"),
        Binding("K", "stop_job", "Stop job"),
    ]

    LogRequested: type[JobRequest[Any]]
    StopRequested: type[JobRequest[Any]]

    def __init__(self, columns: Sequence[str], title: str, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._columns = tuple(columns)
        self._title = title
        self._jobs: dict[str, J] = {}
        self._order: list[str] = []
        self._cells: dict[str, tuple[Any, ...]] = {}
        self._to_highlight: str | None = None
        """A job to highlight once it is shown (the one just launched)."""

    def on_mount(self) -> None:
        self.border_title = self._title
        for name in self._columns:
            self.add_column(name, key=name)

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

    def put_rows(
        self, jobs: dict[str, J], cells: Mapping[str, tuple[Any, ...]], subtitle: str
    ) -> None:
        """Show ``cells`` (keyed rows, in order; a key without a job is shown, not acted on)."""
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
