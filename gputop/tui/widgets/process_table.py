"""Every GPU process with what the host knows of it; sortable, filterable to one card.

Rows are keyed and only changed cells are updated, so a steady machine sends almost
nothing over SSH. Elapsed time is shown to the minute for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from gputop.core.model import GpuProcess, Snapshot
from gputop.core.units import NA, human_bytes

COLUMNS = ("GPU", "PID", "USER", "TYPE", "GPU MEM", "SM", "CPU", "HOST MEM", "ELAPSED", "COMMAND")


@dataclass(frozen=True, slots=True)
class SortKey:
    name: str
    key: Callable[[GpuProcess], Any]
    descending: bool


SORT_KEYS = (
    SortKey("GPU memory", lambda p: p.used_memory_bytes or 0, True),
    SortKey("GPU", lambda p: (p.physical_index, -(p.used_memory_bytes or 0)), False),
    SortKey("CPU", lambda p: p.cpu_percent or 0.0, True),
    SortKey("SM", lambda p: p.sm_util_percent or 0, True),
    SortKey("host memory", lambda p: p.host_memory_bytes or 0, True),
    SortKey("user", lambda p: (p.user or "~", p.pid), False),
    SortKey("PID", lambda p: p.pid, False),
    SortKey("elapsed", lambda p: -(p.start_time or 0.0), True),
)


def row_key(process: GpuProcess) -> str:
    return f"{process.physical_index}:{process.pid}:{process.gpu_instance_id}"


def elapsed_coarse(seconds: float | None) -> str:
    """To the minute: 3m, 5h21m, 2d04h."""
    if seconds is None or seconds < 0:
        return NA
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


class ProcessTable(DataTable[Any]):
    def __init__(self, *, user: str, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self.me = user
        self.sort_index = 0
        self.reverse = False
        self.only_gpu: int | None = None
        self.job_of_pid: Mapping[int, int] = {}
        """pid -> id of the gputop job it belongs to: such rows are marked."""
        self._order: list[str] = []
        self._cells: dict[str, tuple[Any, ...]] = {}
        self._processes: dict[str, GpuProcess] = {}
        self._snapshot: Snapshot | None = None

    def on_mount(self) -> None:
        for name in COLUMNS:
            self.add_column(name, key=name)

    @property
    def sort_key(self) -> SortKey:
        return SORT_KEYS[self.sort_index]

    @property
    def current_process(self) -> GpuProcess | None:
        if not self._order or self.cursor_row < 0 or self.cursor_row >= len(self._order):
            return None
        return self._processes.get(self._order[self.cursor_row])

    def describe_view(self) -> str:
        direction = "ascending" if self.sort_key.descending == self.reverse else "descending"
        scope = "all GPUs" if self.only_gpu is None else f"GPU {self.only_gpu} only"
        return f"Processes: {scope}, by {self.sort_key.name} ({direction})"

    def show(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        processes = [
            p
            for gpu in snapshot.gpus
            for p in gpu.processes
            if self.only_gpu is None or p.physical_index == self.only_gpu
        ]
        processes.sort(key=self.sort_key.key, reverse=self.sort_key.descending != self.reverse)
        self._processes = {row_key(p): p for p in processes}
        order = list(self._processes)
        cells = {key: self._cells_for(p, snapshot.timestamp) for key, p in self._processes.items()}
        if order != self._order:
            self._replace_rows(order, cells)
        else:
            self._update_cells(cells)
        self._cells = cells
        self.border_subtitle = self.describe_view()

    def set_jobs(self, job_of_pid: Mapping[int, int]) -> None:
        if dict(job_of_pid) != dict(self.job_of_pid):
            self.job_of_pid = dict(job_of_pid)
            self.refresh_view()

    def next_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORT_KEYS)
        self.reverse = False
        self.refresh_view()

    def toggle_reverse(self) -> None:
        self.reverse = not self.reverse
        self.refresh_view()

    def toggle_filter(self, physical_index: int | None, follow: bool = False) -> None:
        """Show only one GPU's processes, or all again; ``follow`` keeps filtering."""
        if follow or self.only_gpu is None:
            self.only_gpu = physical_index
        else:
            self.only_gpu = None
        self.refresh_view()

    def refresh_view(self) -> None:
        """Re-sort or re-filter at once, without waiting for the next sample."""
        if self._snapshot is not None:
            self.show(self._snapshot)

    def _replace_rows(self, order: list[str], cells: dict[str, tuple[Any, ...]]) -> None:
        current = self.current_process
        keep = row_key(current) if current is not None else None
        self.clear()
        for key in order:
            self.add_row(*cells[key], key=key)
        self._order = order
        if keep in order:
            self.move_cursor(row=order.index(keep), animate=False)

    def _update_cells(self, cells: dict[str, tuple[Any, ...]]) -> None:
        for key, values in cells.items():
            old = self._cells.get(key)
            for column, value in enumerate(values):
                if old is None or old[column] != value:
                    self.update_cell(key, COLUMNS[column], value)

    def _cells_for(self, process: GpuProcess, now: float) -> tuple[Any, ...]:
        mine = process.user == self.me
        user_style = "bold green" if mine else ""
        command = " ".join(process.command) if process.command else None
        if command is None:
            command_cell = Text(f"({process.hint or 'unknown'})", style="dim italic")
        else:
            command_cell = Text(command)
        job_id = self.job_of_pid.get(process.pid)
        if job_id is not None:
            command_cell = Text.assemble((f"[job {job_id}] ", "bold magenta"), command_cell)
        if process.mig_uuid is not None:
            command_cell = Text.assemble((f"[GI {process.gpu_instance_id}] ", "cyan"), command_cell)
        elapsed = None if process.start_time is None else now - process.start_time
        return (
            str(process.physical_index),
            str(process.pid),
            Text(process.user or "?", style=user_style),
            process.type.value,
            NA if process.used_memory_bytes is None else human_bytes(process.used_memory_bytes),
            NA if process.sm_util_percent is None else f"{process.sm_util_percent}%",
            NA if process.cpu_percent is None else f"{process.cpu_percent:.0f}%",
            human_bytes(process.host_memory_bytes),
            elapsed_coarse(elapsed),
            command_cell,
        )
