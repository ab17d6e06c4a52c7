"""Every GPU process with what the host knows of it; sortable, filterable to one card.

The table owns its rows and paints them itself through Textual's Line API: one
``render_line`` per visible line, a header that stays on top, column widths from the rows.
A painted line is kept, keyed by what it shows, the column widths, its highlight and the
window (scroll and width); a new snapshot repaints only the lines whose rows changed, so a
steady machine costs (and sends over SSH) almost nothing. Elapsed time is shown to the
minute for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import pairwise

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.content import Content
from textual.geometry import Offset, Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputop.core.model import GpuProcess, Snapshot
from gputop.core.process_detail import rendezvous_key
from gputop.core.records import frozen, mutable
from gputop.core.safe_text import clean
from gputop.tui.widgets.process_rows import (
    COLUMNS,
    SORT_KEYS,
    Cell,
    ProcessRow,
    RowMaker,
    SortKey,
    column_widths,
)
from gputop.tui.widgets.rank_groups import GroupKey, group_ranks

__all__ = ["COLUMNS", "SORT_KEYS", "ProcessTable", "SortKey"]

CELL_PADDING = 1
"""Blank cells each side of a cell's text."""
HEADER_LINES = 1
SHOWN_MARGIN_ROWS = 5
"""Rows above and below the window whose processes' host figures are read every refresh
too (``shown_pids``): a few steps of the cursor past an edge show this refresh's."""
MIN_COMMAND_CELLS = 8
"""Below this much room for COMMAND, ←/→ scroll the whole row, not the command alone."""
PAINTED_LINES = 256
"""Painted lines kept (``render_line``): a few screens of the table, its highlight's and
hover's lines both ways. On a busy server most rows change every second, so a larger store
only fills with lines no longer shown and keeps them to the end (with process_rows.py's
cells, 1,024 lines here and 4,096 cells there: 0.5 to 0.65 MiB of the busy server's peak
RSS, docs/speed.md)."""


_region = tuple.__new__
"""``Region``'s own ``__new__`` without its Python frame (a few cells of 35 rows a refresh)."""


@frozen
class _Palette:
    """What one paint looks up once: the styles (they change with the theme and with
    focus), the scroll offset and the width."""

    base: Style
    header: Style
    cursor: Style
    hover: Style
    scroll: Offset
    width: int


class ProcessTable(ScrollView, can_focus=True):
    """The GPU processes; ``current_process`` is the highlighted one (t/T act on it)."""

    DEFAULT_CSS = """
    ProcessTable {
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .process-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .process-table--header {
                background-tint: $foreground 5%;
            }
        }
        & > .process-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .process-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .process-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .process-table--hover {
            background: $block-hover-background;
        }
    }
    """

    COMPONENT_CLASSES = {
        "process-table--header",
        "process-table--cursor",
        "process-table--hover",
    }

    BINDINGS = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "cursor_page_up", "Page up", show=False),
        Binding("pagedown", "cursor_page_down", "Page down", show=False),
        Binding("H", "app.process_history", "Process history", show=False),
        Binding("home,ctrl+home", "cursor_first", "First", show=False),
        Binding("end,ctrl+end", "cursor_last", "Last", show=False),
        Binding("enter", "open_detail", "Details", show=False),
        Binding("r", "toggle_ranks", "Collapse ranks", show=False),
    ]

    def __init__(self, *, user: str, id: str | None = None) -> None:
        super().__init__(id=id)
        self.me = user
        self.sort_index = 0
        self.reverse = False
        self.only_gpu: int | None = None
        self.job_of_pid: Mapping[int, int] = {}
        """pid -> id of the gputop job it belongs to: such rows are marked."""
        self.slurm_of_pid: Mapping[int, int] = {}
        """pid → the Slurm job it runs in (docs/slurm.md)."""
        self.columns: tuple[str, ...] = COLUMNS
        """The header; a subclass adding a column (the lab's HOST) sets it."""
        self._maker = RowMaker(user)
        self._rows: list[ProcessRow] = []
        self._widths = column_widths([])
        self._cursor = 0
        self._hover: int | None = None
        self._snapshot: Snapshot | None = None
        self._subtitle: str | None = None
        self._palette: _Palette | None = None
        self._styles: tuple[Style, Style, Style, Style] | None = None
        """The row, header, cursor and hover styles until the styles next change: Textual
        forgets its own copy at every refresh, and working them out again walked the DOM
        four times a paint."""
        self._painted: LRUCache[tuple[object, ...], Strip] = LRUCache(maxsize=PAINTED_LINES)
        self.collapsed_jobs: set[GroupKey] = set()
        """Distributed jobs whose ranks show as one line (rank_groups.py)."""
        self.text_filter = ""
        """Show only rows with this text in a cell (``/``), ignoring case; "" shows all."""
        self.only_mine = False
        """Show only the user's own processes (``u``)."""
        self._title: str | None = None
        self.on_shown: Callable[[frozenset[int] | None], None] | None = None
        """Told ``shown_pids()`` after each refresh and scroll (the dashboard tells its
        sampler: the processes out of sight need not be read every second)."""

    # -- what is shown -------------------------------------------------------------------

    @property
    def sort_key(self) -> SortKey:
        return SORT_KEYS[self.sort_index]

    @property
    def rows(self) -> tuple[ProcessRow, ...]:
        """The rows in the order shown."""
        return tuple(self._rows)

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def cursor_row(self) -> int:
        """Which row is highlighted (0 when there are none)."""
        return self._cursor

    @property
    def current_process(self) -> GpuProcess | None:
        if not 0 <= self._cursor < len(self._rows):
            return None
        row = self._rows[self._cursor]
        return None if row.group else row.process  # a collapsed job's line is no process

    def describe_view(self) -> str:
        direction = "ascending" if self.sort_key.descending == self.reverse else "descending"
        scope = "all GPUs" if self.only_gpu is None else f"GPU {self.only_gpu} only"
        return f"Processes: {scope}{self.describe_filters()}, by {self.sort_key.name} ({direction})"

    def describe_filters(self) -> str:
        """The text filter and "only mine", as shown after the scope ("" when neither)."""
        said = ", yours only" if self.only_mine else ""  # "all GPUs, yours only, by ..."
        if self.text_filter:
            said += f'{"," if said else ""} matching "{clean(self.text_filter)}"'
        return said

    def unlisted_cards(self) -> list[str]:
        """The cards whose processes NVML would not list: their process list is unknown."""
        gpus = self._snapshot.gpus if self._snapshot is not None else ()
        return [
            f"GPU {gpu.physical_index}"
            for gpu in gpus
            if not gpu.processes_listed and not gpu.lost and not gpu.no_access
        ]

    def set_text_filter(self, text: str) -> None:
        self.text_filter = text.strip()
        self.refresh_view()

    def toggle_only_mine(self) -> None:
        self.only_mine = not self.only_mine
        self.refresh_view()

    def _passes(self, row: ProcessRow) -> bool:
        if self.only_mine and not row.mine:
            return False
        if not self.text_filter:
            return True
        wanted = self.text_filter.casefold()
        return any(wanted in row.text(column).casefold() for column in range(len(row.cells)))

    def _count_title(self, shown: list[ProcessRow], every: list[ProcessRow]) -> str:
        """``12 processes`` (``5 of 12`` when filtered), and which cards' lists are unknown."""
        total = len(every)
        count = sum(max(len(row.group), 1) for row in shown)
        noun = "process" if total == 1 else "processes"
        title = f"{count} of {total} {noun}" if count != total else f"{total} {noun}"
        unlisted = self.unlisted_cards()
        if unlisted:
            title += f" · {', '.join(unlisted)}: process list unavailable (NVML will not list it)"
        return title

    def show(self, snapshot: Snapshot) -> None:
        """Show ``snapshot``'s processes; the highlight stays on the same process."""
        self._snapshot = snapshot
        every = self._make_rows(snapshot)
        filtered = self.only_mine or self.text_filter
        shown = [row for row in every if self._passes(row)] if filtered else every
        rows = group_ranks(shown, self.collapsed_jobs)
        old_rows, old_widths, old_cursor = self._rows, self._widths, self._cursor
        highlighted = old_rows[old_cursor].key if old_cursor < len(old_rows) else None
        self._rows = rows
        self._widths = column_widths(rows, self.columns)
        cursor = next((i for i, row in enumerate(rows) if row.key == highlighted), None)
        self._cursor = min(old_cursor, max(len(rows) - 1, 0)) if cursor is None else cursor
        self.virtual_size = Size(
            sum(width + 2 * CELL_PADDING for width in self._widths), len(rows) + HEADER_LINES
        )
        if self._widths != old_widths:
            self.refresh()
        else:
            self._refresh_changed_lines(old_rows, old_cursor)
        if self._cursor != old_cursor:
            self._scroll_to_cursor()
        title = self._count_title(rows, every)
        if title != self._title:  # a new border title repaints the whole table
            self._title = title
            self.border_title = Content(title)  # never markup: it may quote host names
        subtitle = self.describe_view()
        if subtitle != self._subtitle:  # a new border subtitle repaints the whole table
            self._subtitle = subtitle
            self.border_subtitle = Content(subtitle)  # never markup: it quotes the filter
        self._tell_shown()

    def shown_pids(self) -> frozenset[int] | None:
        """The processes whose host figures (CPU, host memory) are in sight now, with
        ``SHOWN_MARGIN_ROWS`` rows either side; None where every process's figures count:
        sorted by one of them, or a text filter (it matches every cell)."""
        if self.sort_key.by_host or self.text_filter:
            return None
        top = round(self.scroll_offset.y)
        pids: set[int] = set()
        for row in self._rows[
            max(0, top - SHOWN_MARGIN_ROWS) : top + self._page_rows + SHOWN_MARGIN_ROWS
        ]:
            if row.group:  # a collapsed job's line sums its ranks' host memory
                pids.update(process.pid for process in row.group)
            else:
                pids.add(row.process.pid)
        return frozenset(pids)

    def _tell_shown(self) -> None:
        if self.on_shown is not None:
            self.on_shown(self.shown_pids())

    def on_resize(self, _: events.Resize) -> None:
        self._tell_shown()  # more or fewer rows in sight

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self._tell_shown()

    def _make_rows(self, snapshot: Snapshot) -> list[ProcessRow]:
        """The rows to show, in order (the lab's table makes them from every host)."""
        return self._maker.rows(
            snapshot,
            only_gpu=self.only_gpu,
            sort_key=self.sort_key,
            reverse=self.reverse,
            job_of_pid=self.job_of_pid,
            slurm_of_pid=self.slurm_of_pid,
        )

    def _refresh_changed_lines(self, old_rows: list[ProcessRow], old_cursor: int) -> None:
        """Repaint the visible lines whose row, or whose highlight, changed (one refresh
        for all of them: each refresh marks the widget and its ancestors dirty); of a row
        whose highlight stayed, only the cells that changed are written to the terminal
        (the line is still painted whole: ``render_line``)."""
        scroll_y = round(self.scroll_offset.y)
        height = self.scrollable_content_region.height
        width = self.scrollable_content_region.width  # not the scroll bar, nor the widgets beside
        # Each column's start and its width on screen (cut at the window's edge), once.
        spans = None
        if not round(self.scroll_offset.x):
            starts = self._column_starts()
            spans = [(left, min(right, width) - left) for left, right in pairwise(starts)]
        rows, cursor = self._rows, self._cursor
        regions: list[Region] = []
        add = regions.append
        for index in range(
            scroll_y, min(scroll_y + height - HEADER_LINES, max(len(old_rows), len(rows)))
        ):
            old = old_rows[index].cells if index < len(old_rows) else None
            new = rows[index].cells if index < len(rows) else None
            moved = (index == old_cursor) != (index == cursor)
            if old == new and not moved:
                continue
            y = index + HEADER_LINES - scroll_y
            if moved or old is None or new is None or spans is None:
                add(Region(0, y, width, 1))
                continue
            for (left, span), before, after in zip(spans, old, new, strict=True):
                # a cell made once for what it shows is the same object when it stays
                if before is not after and span > 0 and before != after:
                    add(_region(Region, (left, y, span, 1)))
        if regions:
            self.refresh(*regions)

    def _column_starts(self) -> list[int]:
        """Where each column starts on a line not scrolled sideways, its padding included,
        and (last) where the last one ends."""
        starts = [0]
        for column_width in self._widths:
            starts.append(starts[-1] + column_width + 2 * CELL_PADDING)
        return starts

    def set_slurm_jobs(self, slurm_of_pid: Mapping[int, int]) -> None:
        if dict(slurm_of_pid) != dict(self.slurm_of_pid):
            self.slurm_of_pid = dict(slurm_of_pid)
            self.refresh_view()

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

    def resort(self) -> None:
        """Sort exactly by what is shown now (``o``): rows that the margin held in place
        move (process_rows.py, row_order.py)."""
        self._maker.resort()
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

    # -- the highlight -------------------------------------------------------------------

    def move_cursor(self, row: int) -> None:
        """Highlight row ``row`` (clamped to the rows there are) and scroll it into view."""
        row = max(0, min(row, len(self._rows) - 1))
        if row != self._cursor:
            self.refresh_line(self._cursor + HEADER_LINES)
            self._cursor = row
            self.refresh_line(row + HEADER_LINES)
        self._scroll_to_cursor()

    @property
    def _page_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - HEADER_LINES)

    def _scroll_to_cursor(self) -> None:
        top = round(self.scroll_offset.y)
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False)
        elif self._cursor >= top + self._page_rows:
            self.scroll_to(y=self._cursor - self._page_rows + 1, animate=False)

    @mutable
    class DetailRequested(Message):
        """Enter on a process: the app opens its detail."""

        process: GpuProcess

    def action_open_detail(self) -> None:
        if 0 <= self._cursor < len(self._rows) and self._rows[self._cursor].group:
            self.action_toggle_ranks()  # a collapsed job: enter opens it
            return
        process = self.current_process
        if process is not None:
            self.post_message(self.DetailRequested(process))

    def action_toggle_ranks(self) -> None:
        """Collapse the highlighted rank's job into one line, or expand it again."""
        if not 0 <= self._cursor < len(self._rows):
            return
        process = self._rows[self._cursor].process
        key = rendezvous_key(process)
        if key is None:  # say why nothing happened
            self.app.notify(
                f"Process {process.pid} is no rank of a distributed job: r collapses a job's "
                "ranks to one line."
            )
            return
        if key in self.collapsed_jobs:
            self.collapsed_jobs.discard(key)
        else:
            self.collapsed_jobs.add(key)
        self.refresh_view()

    def action_cursor_up(self) -> None:
        self.move_cursor(self._cursor - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(self._cursor + 1)

    def action_cursor_page_up(self) -> None:
        self.move_cursor(self._cursor - self._page_rows)

    def action_cursor_page_down(self) -> None:
        self.move_cursor(self._cursor + self._page_rows)

    def action_cursor_first(self) -> None:
        self.move_cursor(0)

    def action_cursor_last(self) -> None:
        self.move_cursor(len(self._rows) - 1)

    # -- the mouse -----------------------------------------------------------------------

    def _row_at(self, event: events.MouseEvent) -> int | None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < HEADER_LINES:
            return None
        row = offset.y - HEADER_LINES + round(self.scroll_offset.y)
        return row if row < len(self._rows) else None

    def on_click(self, event: events.Click) -> None:
        row = self._row_at(event)
        if row is not None:
            self.move_cursor(row)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._set_hover(self._row_at(event))

    def on_leave(self, event: events.Leave) -> None:
        self._set_hover(None)

    def _set_hover(self, row: int | None) -> None:
        if row != self._hover:
            for old_or_new in (self._hover, row):
                if old_or_new is not None:
                    self.refresh_line(old_or_new + HEADER_LINES)
            self._hover = row

    # -- painting ------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        # Called whenever Textual applies the stylesheet to this widget: a theme, its focus,
        # a class of its own or of an ancestor (each restyles every node under it).
        super().notify_style_update()
        self._painted.clear()
        self._styles = None

    def _current_palette(self) -> _Palette:
        if self._styles is None:
            self._styles = (
                self.rich_style,
                self.get_component_rich_style("process-table--header"),
                self.get_component_rich_style("process-table--cursor"),
                self.get_component_rich_style("process-table--hover"),
            )
        base, header, cursor, hover = self._styles
        return _Palette(base, header, cursor, hover, self.scroll_offset, self.size.width)

    def render_lines(self, crop: Region) -> list[Strip]:
        # The styles, the size and the scroll are the same for every line of one paint:
        # look them up once (a widget's size walks the DOM to the screen each time).
        self._palette = self._current_palette()
        try:
            return super().render_lines(crop)
        finally:
            self._palette = None

    def render_line(self, y: int) -> Strip:
        palette = self._palette or self._current_palette()
        scroll_x, scroll_y = palette.scroll
        width = palette.width
        if y < HEADER_LINES:
            style = palette.base + palette.header
            scroll_x = 0  # the header stays: COMMAND names its column however far it scrolls
            key: tuple[object, ...] = ("header", self._widths, style, scroll_x, width)
            cells: tuple[Cell, ...] = tuple(((name, ""),) for name in self.columns)
            used = tuple(cell_len(name) for name in self.columns)
            over = Style.null()
        else:
            index = y - HEADER_LINES + scroll_y
            if not 0 <= index < len(self._rows):
                return Strip.blank(width, palette.base)
            if index == self._cursor:
                over = palette.cursor
            elif index == self._hover:
                over = palette.hover
            else:
                over = Style.null()
            style = palette.base
            row = self._rows[index]
            cells, used = row.cells, row.widths
            key = (cells, self._widths, style, over, scroll_x, width)
        strip = self._painted.get(key)
        if strip is None:
            if scroll_x:
                whole = self._paint(cells, used, style, over)
                strip = self._window(whole, scroll_x, width, style + over)
            else:
                strip = self._paint(cells, used, style, over, fit=width)
            self._painted[key] = strip
        return strip

    def _window(self, whole: Strip, scroll_x: int, width: int, style: Style) -> Strip:
        """What shows of a row: the columns before COMMAND stay, only COMMAND scrolls.

        ``virtual_size`` is the whole row's width, so scrolling right by ``scroll_x`` shows
        COMMAND from its ``scroll_x``-th cell on. A window too narrow for the fixed columns
        and a few cells of the command scrolls the whole row, so every column can be read.
        """
        fixed = sum(w + 2 * CELL_PADDING for w in self._widths[:-1]) + CELL_PADDING
        if fixed + MIN_COMMAND_CELLS > width:  # too narrow: the whole row scrolls
            return whole.crop_extend(scroll_x, scroll_x + width, style)
        command = whole.crop(fixed + scroll_x, scroll_x + width)
        return Strip.join([whole.crop(0, fixed), command]).crop_extend(0, width, style)

    def _paint(
        self,
        cells: tuple[Cell, ...],
        used: tuple[int, ...],
        base: Style,
        over: Style,
        fit: int | None = None,
    ) -> Strip:
        """A whole row, every column laid out (``used``: each cell's width), or with ``fit``
        the row not scrolled sideways in exactly that many cells, as ``crop_extend(0, fit)``
        of the whole row makes it without the whole row's strip. Neighbouring parts of one
        style are one segment, as ``Strip.simplify`` would make them: most cells are one
        plain part, written with their padding as one string."""
        plain = base + over
        pad = " " * CELL_PADDING
        parts: list[tuple[str, Style]] = []
        add = parts.append
        for cell, cell_width, width in zip(cells, used, self._widths, strict=True):
            if len(cell) == 1 and not cell[0][1]:  # one part in the row's own style
                add((f"{pad}{cell[0][0]}{' ' * (width - cell_width)}{pad}", plain))
                continue
            add((pad, plain))
            for part, style_name in cell:
                add((part, base + Style.parse(style_name) + over if style_name else plain))
            add((" " * (width - cell_width) + pad, plain))
        segments: list[Segment] = []
        run: list[str] = []
        run_style = plain
        for text, style in parts:
            if style is not run_style and style != run_style:
                joined = "".join(run)
                if joined:
                    segments.append(Segment(joined, run_style))
                run, run_style = [text], style
            else:
                run.append(text)
        joined = "".join(run)
        if joined:
            segments.append(Segment(joined, run_style))
        if fit is None:
            return Strip(segments)
        total = sum(self._widths) + 2 * CELL_PADDING * len(self._widths)
        if total <= fit:
            if total < fit:
                segments.append(Segment(" " * (fit - total), plain))
            return Strip(segments, fit)
        shown: list[Segment] = []
        position = 0
        for segment in segments:  # as Strip.crop cuts: a wide character cut in two is spaces
            end = position + cell_len(segment.text)
            if end >= fit:
                shown.append(segment.split_cells(fit - position)[0])
                break
            shown.append(segment)
            position = end
        return Strip(shown, fit)
