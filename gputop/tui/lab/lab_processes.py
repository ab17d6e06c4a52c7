"""The process table across hosts: every host's processes, a HOST column, a host filter.

Rows are made per host (each host has its own "you": the account its agent runs as), then
sorted together by the table's sort key, held still as on one host (a row passes another
only by the key's margin: row_order.py). With one host there is no HOST column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field

from rich.cells import cell_len

from gputop.core.model import Snapshot
from gputop.core.records import mutable
from gputop.core.safe_text import clean
from gputop.tui.row_order import HeldOrder
from gputop.tui.widgets.process_rows import COLUMNS, ProcessRow, RowMaker, column_widths
from gputop.tui.widgets.process_table import ProcessTable

HOST_STYLE = "cyan"


@mutable
class HostRows:
    """What the table knows of one host."""

    name: str
    snapshot: Snapshot | None
    user: str
    job_of_pid: Mapping[int, int] = field(default_factory=dict)


class LabProcessTable(ProcessTable):
    def __init__(self, *, user: str, host_names: Sequence[str], id: str | None = None) -> None:
        super().__init__(user=user, id=id)
        self.host_names = list(host_names)
        self.multi_host = len(self.host_names) > 1
        if self.multi_host:
            self.columns = ("HOST", *COLUMNS)
            self._widths = column_widths([], self.columns)
        self.only_host: int | None = None
        """Show one host's processes only (``h``), by position."""
        self.gpu_host: int | None = None
        """The host of ``only_gpu`` (``f`` filters to one card of one host)."""
        self._hosts: list[HostRows] = []
        self._makers: dict[tuple[int, str, str], RowMaker] = {}
        self._row_hosts: dict[str, int] = {}
        self._names: dict[int, tuple[str, str]] = {}
        self._held = HeldOrder()
        """The order across hosts at the last refresh (row keys are unique across hosts)."""

    def show_hosts(self, hosts: list[HostRows]) -> None:
        self._hosts = hosts
        first = next((h.snapshot for h in hosts if h.snapshot is not None), None)
        if first is not None:
            self.show(first)  # the argument only marks that there is data: rows are ours

    def _make_rows(self, snapshot: Snapshot) -> list[ProcessRow]:
        rows: list[tuple[int, ProcessRow]] = []
        for position, host in enumerate(self._hosts):
            if host.snapshot is None or self.only_host not in (None, position):
                continue
            if self.only_gpu is not None and self.gpu_host != position:
                continue
            made = self._maker_for(position, host).rows(
                host.snapshot,
                only_gpu=self.only_gpu,
                sort_key=self.sort_key,
                reverse=self.reverse,
                job_of_pid=host.job_of_pid,
            )
            rows.extend((position, row) for row in made)
        key = self.sort_key
        by_key: dict[tuple[str, int], ProcessRow] = {}
        for _, row in rows:
            seen = 0
            while (row.key, seen) in by_key:  # a process listed twice: both rows stay
                seen += 1
            by_key[row.key, seen] = row
        descending, amounts_descending = key.directions(self.reverse)
        order = self._held.order(
            {row_key: key.key(row.process) for row_key, row in by_key.items()},
            key.margin,
            descending,
            (key.name, self.reverse),
            amounts_descending,
        )
        self._row_hosts = {row.key: position for position, row in rows}
        return [by_key[row_key] for row_key in order]

    def resort(self) -> None:
        self._held.resort()
        for maker in self._makers.values():
            maker.resort()
        super().resort()

    def _maker_for(self, position: int, host: HostRows) -> RowMaker:
        """One row maker per host and account, which puts the host's name (cleaned, once)
        in the HOST column of its rows and its position in their keys."""
        name = self._clean_name(position)
        maker_key = (position, host.user, name)
        maker = self._makers.get(maker_key)
        if maker is None:
            lead = (((name, HOST_STYLE),), cell_len(name)) if self.multi_host else None
            maker = RowMaker(host.user, lead=lead, key_prefix=f"{position}:")
            self._makers = {k: m for k, m in self._makers.items() if k[0] != position}
            self._makers[maker_key] = maker
        return maker

    def _clean_name(self, position: int) -> str:
        name = self._hosts[position].name
        cached = self._names.get(position)
        if cached is None or cached[0] != name:
            cached = self._names[position] = (name, clean(name))
        return cached[1]

    @property
    def current_host(self) -> int | None:
        """The highlighted process's host position."""
        rows = self.rows
        if not 0 <= self.cursor_row < len(rows):
            return None
        return self._row_hosts.get(rows[self.cursor_row].key)

    def filter_card(self, host: int, physical_index: int | None, follow: bool = False) -> None:
        """``f``: one card of one host, or everything again."""
        if follow or self.only_gpu is None:
            self.only_gpu, self.gpu_host = physical_index, host
        else:
            self.only_gpu, self.gpu_host = None, None
        self.refresh_view()

    def filter_host(self, host: int | None) -> None:
        """``h``: one host's processes (the highlighted card's host), or every host again."""
        self.only_host = host if self.only_host is None else None
        self.refresh_view()

    def describe_view(self) -> str:
        direction = "ascending" if self.sort_key.descending == self.reverse else "descending"
        scope = "every host" if self.multi_host else "all GPUs"
        if self.only_host is not None:
            scope = f"host {clean(self.host_names[self.only_host])} only"
        if self.only_gpu is not None and self.gpu_host is not None:
            scope = f"GPU {self.only_gpu} of {clean(self.host_names[self.gpu_host])} only"
        return f"Processes: {scope}{self.describe_filters()}, by {self.sort_key.name} ({direction})"

    def unlisted_cards(self) -> list[str]:
        return [
            f"{self._clean_name(position)} GPU {gpu.physical_index}"
            for position, host in enumerate(self._hosts)
            if host.snapshot is not None
            for gpu in host.snapshot.gpus
            if not gpu.processes_listed and not gpu.lost and not gpu.no_access
        ]
