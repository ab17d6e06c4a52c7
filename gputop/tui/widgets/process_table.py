"""Every GPU process with what the host knows of it; sortable, filterable to one card.

Rows are keyed and only changed cells are updated, so a steady machine sends almost
nothing over SSH. Elapsed time is shown to the minute for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.renderables.styled import Styled
from textual.strip import Strip
from textual.widgets import DataTable
from typing_extensions import Self

from gputop.core.model import GpuProcess, Snapshot
from gputop.core.units import NA, human_bytes
from gputop.tui.widgets.table_rows import replace_rows

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


def _value_key(value: Any) -> Any:
    """What a cell's rendering depends on, hashable."""
    if isinstance(value, Text):
        return (value.plain, value.style, tuple(value.spans), value.justify, value.overflow)
    return value


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
    _repaint_later = False
    """True while ``_update_cells`` changes cells: it repaints them itself afterwards."""

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
        self._subtitle: str | None = None
        self._fixed_cells: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._rendered_cells: dict[tuple[Any, ...], list[Segment]] = {}
        self._styles_by_row: dict[tuple[Any, ...], tuple[list[Style], Style, Style]] = {}
        self._painted_state: Any = None
        self._base_style: Style | None = None

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
        known, self._fixed_cells = self._fixed_cells, {}
        cells = {
            key: self._cells_for(p, snapshot.timestamp, known) for key, p in self._processes.items()
        }
        if order != self._order:
            self._replace_rows(order, cells)
        else:
            self._update_cells(cells)
        self._cells = cells
        subtitle = self.describe_view()
        if subtitle != self._subtitle:  # setting a border title repaints the whole table
            self._subtitle = subtitle
            self.border_subtitle = subtitle

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
        replace_rows(self, order, cells, keep)
        self._order = order

    def _update_cells(self, cells: dict[str, tuple[Any, ...]]) -> None:
        """Change the cells that changed, and repaint only those that are on screen."""
        changed: dict[int, list[int]] = {}
        first_shown = self.scroll_offset.y
        last_shown = first_shown + self.size.height
        self._repaint_later = True
        try:
            for row, key in enumerate(self._order):
                old, values = self._cells.get(key), cells[key]
                for column, value in enumerate(values):
                    if old is None or (old[column] is not value and old[column] != value):
                        self.update_cell(key, COLUMNS[column], value)
                        if first_shown <= row <= last_shown:
                            changed.setdefault(row, []).append(column)
        finally:
            self._repaint_later = False
        if changed:
            self.refresh(*self._row_regions(changed))

    def _row_regions(self, changed: dict[int, list[int]]) -> list[Region]:
        """Where the changed cells of each row are on screen: one region a row."""
        edges = [0]
        for column in self.ordered_columns:
            edges.append(edges[-1] + column.get_render_width(self))
        scroll_x, scroll_y = self.scroll_offset
        window = self.window_region
        top = self.header_height if self.show_header else 0
        regions = []
        for row, columns in changed.items():
            left, right = edges[min(columns)], edges[max(columns) + 1]
            region = Region(left, row + top, right - left, 1)
            if window.overlaps(region):
                regions.append(region.translate((-scroll_x, -scroll_y)))
        return regions

    def refresh(self, *regions: Region, **options: Any) -> Self:
        # update_cell repaints the whole table; _update_cells repaints the changed cells.
        if self._repaint_later and not regions and not options:
            return self
        return super().refresh(*regions, **options)

    # -- painting rows -------------------------------------------------------------------
    #
    # DataTable renders every cell of a row through Rich again whenever any cell of the
    # table changed; with 200 processes whose CPU use moves every second that was most of
    # the dashboard's CPU time. A row is painted here instead, the same way DataTable
    # would (tests compare the two), from cells that were rendered once for their value.

    def render_line(self, y: int) -> Strip:
        strip = self._render_row(y)
        return super().render_line(y) if strip is None else strip

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._rendered_cells.clear()
        self._styles_by_row.clear()

    def _render_row(self, y: int) -> Strip | None:
        """A process row as DataTable would paint it; ``None`` for the header and the rest."""
        show_hover_cursor = getattr(self, "_show_hover_cursor", None)
        if (
            not self.show_header
            or y < self.header_height
            or self.fixed_rows
            or self.fixed_columns
            or self.zebra_stripes
            or self.cursor_type != "row"
            or not isinstance(show_hover_cursor, bool)
        ):
            return None
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        row_index = y - self.header_height + scroll_y
        if not 0 <= row_index < self.row_count:
            return None
        values = self.get_row_at(row_index)
        columns = self.ordered_columns
        if len(values) != len(columns):
            return None
        row_style = self._base_style or self.rich_style
        hover = self.hover_coordinate.row == row_index
        cursor = self.cursor_coordinate.row == row_index
        cell_styles, post, extend = self._row_styles(
            row_index, len(columns), row_style, hover, cursor, show_hover_cursor
        )
        segments: list[Segment] = []
        table_width = 0
        for column, value, pre in zip(columns, values, cell_styles, strict=True):
            cell_width = column.get_render_width(self)
            table_width += cell_width
            segments.extend(self._cell_segments(value, cell_width, pre, post))
        segments.append(Segment(" " * max(0, width - table_width), extend))
        return Strip(segments).crop(scroll_x).adjust_cell_length(width, row_style).simplify()

    def render_lines(self, crop: Region) -> list[Strip]:
        state = self.get_pseudo_class_state()
        if state != self._painted_state:  # focus and the like change the cursor's colours
            self._painted_state = state
            self._styles_by_row.clear()
        self._base_style = self.rich_style  # the same for every row of this pass
        try:
            return super().render_lines(crop)
        finally:
            self._base_style = None

    def _row_styles(
        self,
        row_index: int,
        columns: int,
        row_style: Style,
        hover: bool,
        cursor: bool,
        show_hover_cursor: bool,
    ) -> tuple[list[Style], Style, Style]:
        """Each cell's style before its content, the style over it, and the row's end.

        Made as DataTable makes them, in the same order (styles with metadata compare by
        how they were added up), and kept: adding styles is most of a row's cost.
        """
        key = (row_index, columns, row_style, hover, cursor, show_hover_cursor, self.show_cursor)
        styles = self._styles_by_row.get(key)
        if styles is None:
            if len(self._styles_by_row) > 2048:
                self._styles_by_row.clear()
            component, post = self._cursor_styles(hover, cursor, show_hover_cursor)
            cells = [
                row_style + Style.from_meta({"row": row_index, "column": column}) + component
                for column in range(columns)
            ]
            extend, _ = self._cursor_styles(hover, cursor, show_hover_cursor, css=False)
            out_of_bounds = Style.from_meta({"row": row_index, "column": 0, "out_of_bounds": True})
            styles = self._styles_by_row[key] = (cells, post, row_style + extend + out_of_bounds)
        return styles

    def _cursor_styles(
        self, hover: bool, cursor: bool, show_hover_cursor: bool, css: bool = True
    ) -> tuple[Style, Style]:
        """DataTable's cursor and hover styles for a cell, and what goes over its content."""
        component = Style()
        if hover and self.show_cursor and show_hover_cursor:
            component += self.get_component_rich_style("datatable--hover")
        if cursor and self.show_cursor:
            component += self.get_component_rich_style("datatable--cursor")
        if not css:
            return component, Style.null()
        foreground = (
            Style.from_color(color=component.color)
            if self.cursor_foreground_priority == "css"
            else Style.null()
        )
        background = (
            Style.from_color(bgcolor=component.bgcolor)
            if self.cursor_background_priority == "css"
            else Style.null()
        )
        return component, foreground + background

    def _cell_segments(self, value: Any, width: int, pre: Style, post: Style) -> list[Segment]:
        if (
            isinstance(value, str)
            and value.isascii()
            and value.isprintable()
            and "[" not in value
            and ":" not in value
        ):
            # What Rich makes of plain text in a padded cell, without asking Rich.
            room = max(width - 2 * self.cell_padding, 0)
            pad = " " * self.cell_padding
            return [Segment(f"{pad}{value[:room]:<{room}}{pad}", pre + post if post else pre)]
        key = (_value_key(value), width, pre, post)
        segments = self._rendered_cells.get(key)
        if segments is None:
            if len(self._rendered_cells) > 4 * 1024:
                self._rendered_cells.clear()
            options = self.app.console_options.update_dimensions(width, 1).update(no_wrap=True)
            lines = self.app.console.render_lines(
                Styled(Padding(value, (0, self.cell_padding)), pre_style=pre, post_style=post),
                options,
            )
            segments = self._rendered_cells[key] = lines[0]
        return segments

    def _cells_for(
        self, process: GpuProcess, now: float, known: dict[tuple[Any, ...], tuple[Any, ...]]
    ) -> tuple[Any, ...]:
        """A row's cells; those that only change with the process itself are kept."""
        job_id = self.job_of_pid.get(process.pid)
        identity = (
            process.pid,
            process.physical_index,
            process.user,
            process.command,
            process.hint,
            process.mig_uuid,
            process.gpu_instance_id,
            job_id,
        )
        fixed = known.get(identity) or self._fixed_cells_for(process, job_id)
        self._fixed_cells[identity] = fixed
        gpu, pid, user, command = fixed
        elapsed = None if process.start_time is None else now - process.start_time
        return (
            gpu,
            pid,
            user,
            process.type.value,
            NA if process.used_memory_bytes is None else human_bytes(process.used_memory_bytes),
            NA if process.sm_util_percent is None else f"{process.sm_util_percent}%",
            NA if process.cpu_percent is None else f"{process.cpu_percent:.0f}%",
            human_bytes(process.host_memory_bytes),
            elapsed_coarse(elapsed),
            command,
        )

    def _fixed_cells_for(self, process: GpuProcess, job_id: int | None) -> tuple[Any, ...]:
        mine = process.user == self.me
        user_style = "bold green" if mine else ""
        command = " ".join(process.command) if process.command else None
        if command is None:
            command_cell = Text(f"({process.hint or 'unknown'})", style="dim italic")
        else:
            command_cell = Text(command)
        if job_id is not None:
            command_cell = Text.assemble((f"[job {job_id}] ", "bold magenta"), command_cell)
        if process.mig_uuid is not None:
            command_cell = Text.assemble((f"[GI {process.gpu_instance_id}] ", "cyan"), command_cell)
        return (
            str(process.physical_index),
            str(process.pid),
            Text(process.user or "?", style=user_style),
            command_cell,
        )
