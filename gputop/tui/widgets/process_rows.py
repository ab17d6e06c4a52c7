"""The process table's rows, made from a snapshot: cleaned plain text and our own styles.

The widget (``process_table.py``) only lays these rows out and paints them. Every string
that comes from outside gputop (command line, user, hint) passes through
:func:`gputop.core.safe_text.clean` here and is drawn as plain text, never parsed as markup
(see docs/security.md). Styles are gputop's own style names, never taken from data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from rich.cells import cell_len

from gputop.core.health import xids_since
from gputop.core.model import GpuHealth, GpuProcess, ProcessType, Snapshot
from gputop.core.records import frozen
from gputop.core.safe_text import clean, clean_argv
from gputop.core.units import MIB, NA, duration_coarse, human_bytes
from gputop.core.xid import describe
from gputop.tui.row_order import EXACT, HeldOrder, Margin, Value

COLUMNS = ("GPU", "PID", "USER", "TYPE", "GPU MEM", "SM", "CPU", "HOST MEM", "ELAPSED", "COMMAND")

Part = tuple[str, str]
"""A run of text and the Rich style it is drawn in ("" for the row's own style)."""
Cell = tuple[Part, ...]

OWN_USER_STYLE = "bold green"
HINT_STYLE = "dim italic"
JOB_MARK_STYLE = "bold magenta"
SLURM_MARK_STYLE = "bold blue"
MIG_MARK_STYLE = "cyan"
RANK_MARK_STYLE = "bold cyan"
MISMATCH_MARK_STYLE = "bold red"
XID_MARK_STYLES = {"critical": "bold red", "warning": "bold yellow"}


@frozen
class SortKey:
    name: str
    key: Callable[[GpuProcess], Value]
    """What a row is sorted by, as the table shows it: a part compared exactly, then an
    amount compared with ``margin`` (gputop/tui/row_order.py)."""
    descending: bool
    margin: Margin = EXACT
    """How much more a row's amount must be to pass another's (rows within it hold still)."""
    amounts_flipped: bool = False
    """The amounts go the other way from the exact parts (the GPU column: cards in order,
    on each the most memory first)."""
    by_host: bool = False
    """Sorted by what the host reads (CPU, host memory): every process's must be fresh."""

    def directions(self, reverse: bool) -> tuple[bool, bool]:
        """The exact parts' and the amounts' directions (True: largest first)."""
        down = self.descending != reverse
        return down, down != self.amounts_flipped


GIB = 1024**3


def shown_bytes(value: int | None) -> float:
    """A size as ``human_bytes`` shows it (812M, 3.2G), for sorting by what is shown."""
    if value is None:
        return 0.0
    if value >= GIB:
        return round(value / GIB, 1) * GIB
    return float(value // MIB * MIB)


def shown_minutes(start_time: float | None) -> float:
    """A start time to the minute, as the elapsed column shows it (``duration_coarse``)."""
    return -(start_time or 0.0) // 60


MEMORY_MARGIN = Margin(absolute=MIB, relative=0.05, coarse=(GIB, 0.25 * GIB))
"""A size passes another when it shows more than 5 % more, and from 1.0G on, where sizes
are shown to 0.1G, more than two such steps more (1.2G does not pass 1.0G, 1.3G does): a
size at a rounding boundary shows a whole step more for a few bytes, so two sizes one step
apart can show two. An allocator growing and shrinking by a percent or two each second
moves no row; a process that doubles moves at once."""
PERCENT_MARGIN = Margin(absolute=10)
"""SM %: ten points (a kernel mix moves it by several each second)."""
CPU_MARGIN = Margin(absolute=10, relative=0.1)
"""CPU %: ten points, or a tenth of a busy process's several hundred."""

# Each key orders by the value as the table shows it, and a row passes another only when
# its shown value is clearly larger (the margin): rows within the margin of each other keep
# the order they had (RowMaker.rows, gputop/tui/row_order.py), so readings that move every
# second do not reorder the table (docs/reference.md, "The process table's order").
SORT_KEYS = (
    SortKey("GPU memory", lambda p: ((), shown_bytes(p.used_memory_bytes)), True, MEMORY_MARGIN),
    SortKey(
        "GPU",
        lambda p: ((p.physical_index,), shown_bytes(p.used_memory_bytes)),
        False,
        MEMORY_MARGIN,
        amounts_flipped=True,
    ),
    SortKey("CPU", lambda p: ((), round(p.cpu_percent or 0.0)), True, CPU_MARGIN, by_host=True),
    SortKey("SM", lambda p: ((), p.sm_util_percent or 0), True, PERCENT_MARGIN),
    SortKey(
        "host memory",
        lambda p: ((), shown_bytes(p.host_memory_bytes)),
        True,
        MEMORY_MARGIN,
        by_host=True,
    ),
    SortKey("user", lambda p: ((p.user or "~", p.pid), 0.0), False),
    SortKey("PID", lambda p: ((p.pid,), 0.0), False),
    SortKey("elapsed", lambda p: ((), shown_minutes(p.start_time)), True),
)


class ProcessRow(NamedTuple):
    """One process as the table shows it; ``cells`` is all that its painting depends on.

    A named tuple, not a frozen dataclass: 200 are made a second on a busy server, and a
    frozen dataclass's ``__init__`` costs several times as much."""

    key: str
    process: GpuProcess
    cells: tuple[Cell, ...]
    widths: tuple[int, ...]
    """Each cell's width in terminal cells (wide characters count two)."""
    group: tuple[GpuProcess, ...] = ()
    """For a collapsed job's line (rank_groups.py): its ranks; such a line is no process."""
    mine: bool = False
    """The process is the user's own (``u`` shows only these)."""

    def text(self, column: int) -> str:
        """What cell ``column`` shows, as plain text."""
        return "".join(text for text, _ in self.cells[column])


STEADY_WIDTHS = {"SM": cell_len("100%"), "CPU": cell_len("100%")}
"""Columns as wide as a percentage of 100 from the start: a process reaching 100 % would
otherwise widen its column and move every column right of it, on every row, and back when
it drops (a busy server sends that to the terminal every few seconds; docs/speed.md)."""


def _title_width(name: str) -> int:
    return max(cell_len(name), STEADY_WIDTHS.get(name, 0))


HEADER_WIDTHS = tuple(_title_width(name) for name in COLUMNS)


def row_key(process: GpuProcess) -> str:
    return f"{process.physical_index}:{process.pid}:{process.gpu_instance_id}"


def column_widths(rows: list[ProcessRow], columns: tuple[str, ...] = COLUMNS) -> tuple[int, ...]:
    """Each column as wide as its widest cell or its title (SM and CPU: at least "100%")."""
    titles = (
        tuple(_title_width(name) for name in columns) if columns is not COLUMNS else HEADER_WIDTHS
    )
    if not rows:
        return tuple(titles)
    return tuple(map(max, titles, *(row.widths for row in rows)))


_Fixed = tuple[tuple[Cell, ...], tuple[int, ...], str]
"""GPU, PID, USER and COMMAND cells, their widths, and the row's key."""


def _plain(text: str) -> Cell:
    return ((text, ""),)


_cells: dict[str, Cell] = {}
_CELLS_LIMIT = 1024
"""Cells kept at most (a shown text: 44.2G, 937M, 42%); then they start over. A refresh of
200 processes shows a few hundred texts; on a busy server, whose memory figures move every
second, a larger store only fills with texts no row shows any more and keeps them to the end
(process_table.PAINTED_LINES)."""

Sized = tuple[Cell, int]
"""A cell of plain text and its width (the text's length: ASCII, one terminal cell a
character)."""


def _cell(text: str) -> Cell:
    """A cell of plain ``text``, made once per text."""
    cell = _cells.get(text)
    if cell is None:
        if len(_cells) > _CELLS_LIMIT:
            _cells.clear()
        cell = _cells[text] = ((text, ""),)
    return cell


def _sized(text: str) -> Sized:
    return _cell(text), len(text)


def _kept(store: dict[int, Sized], key: int, text: str) -> Sized:
    """``text``'s cell, kept in ``store`` by the number ``key`` it is made from."""
    if len(store) > _CELLS_LIMIT:
        store.clear()
    sized = store[key] = _sized(text)
    return sized


_NA = _sized(NA)
_PERCENTS = tuple(_sized(f"{value}%") for value in range(101))
_mebibytes: dict[int, Sized] = {}
"""A size's cell under 1 GiB by its whole MiB (``human_bytes``: 937M)."""
_tenths: dict[int, Sized] = {}
"""A size's cell from 1 GiB by its tenths of a GiB (``human_bytes``: 44.2G)."""
_HALF_TENTH = GIB // 2
_EXACT_FLOATS = 1 << 53
"""Sizes below this are exact as floats, so their tenths can be worked out in integers."""


def _bytes_sized(value: int | None) -> Sized:
    """``human_bytes(value)``'s cell (``N/A`` for None), by the number it shows: no text is
    formatted for a figure shown before. The tenths are rounded as ``f"{x:.1f}"`` rounds the
    exact ``value / GiB``: to the nearest, a tie to the even tenth."""
    if value is None:
        return _NA
    if value < GIB:
        mebibytes = value >> 20  # value // MIB
        return _mebibytes.get(mebibytes) or _kept(_mebibytes, mebibytes, f"{mebibytes}M")
    if value >= _EXACT_FLOATS:
        return _sized(human_bytes(value))
    tenths, rest = divmod(10 * value, GIB)
    if rest > _HALF_TENTH or (rest == _HALF_TENTH and tenths & 1):
        tenths += 1
    sized = _tenths.get(tenths)
    if sized is None:
        whole, tenth = divmod(tenths, 10)
        sized = _kept(_tenths, tenths, f"{whole}.{tenth}G")
    return sized


def _percent_sized(value: int | None) -> Sized:
    """``42%``'s cell; made once for 0 to 100."""
    if value is None:
        return _NA
    return _PERCENTS[value] if 0 <= value <= 100 else _sized(f"{value}%")


_ages: dict[int, Sized] = {}


def _age_sized(elapsed: float | None) -> Sized:
    """``duration_coarse(elapsed)``'s cell, kept by the minute it shows (made anew for a
    process once a minute, not every refresh)."""
    if elapsed is None or elapsed < 60:
        return _sized(duration_coarse(elapsed))
    minutes = int(elapsed // 60)
    return _ages.get(minutes) or _kept(_ages, minutes, duration_coarse(elapsed))


_kinds: dict[ProcessType, Sized] = {}


def _kind_sized(kind: ProcessType) -> Sized:
    sized = _kinds.get(kind)
    if sized is None:
        sized = _kinds[kind] = _sized(kind.value)
    return sized


_new_row = tuple.__new__
"""``ProcessRow``'s own ``__new__`` without its Python frame (200 rows a refresh)."""


class RowMaker:
    """Makes rows from snapshots; what depends only on the process itself is made once.

    A command line is cleaned and measured once per process, not once per refresh.
    """

    def __init__(
        self, user: str, *, lead: tuple[Cell, int] | None = None, key_prefix: str = ""
    ) -> None:
        self.me = user
        self._fixed: dict[tuple[int, int, int | None], tuple[tuple[Any, ...], _Fixed]] = {}
        """Each process's fixed cells by (pid, card, GPU instance), with what they show:
        a key of small numbers, hashed once, and the rest compared (mostly the same objects
        as the last refresh's), not a tuple of everything hashed twice a row."""
        self._lead = lead
        """A first cell for every row and its width (the lab's HOST column), or None."""
        self._key_prefix = key_prefix
        """Before every row key (the lab's host position: keys are unique across hosts)."""
        self._order = HeldOrder()
        """The last refresh's order: a row passes another only by a clear margin."""
        self._health: dict[int, GpuHealth] = {}
        """This refresh's health of each card that has had Xids, for those since a process
        started; a card with none is left out (its 200 rows need no look at its events)."""

    def rows(
        self,
        snapshot: Snapshot,
        *,
        only_gpu: int | None,
        sort_key: SortKey,
        reverse: bool,
        job_of_pid: Mapping[int, int],
        slurm_of_pid: Mapping[int, int] | None = None,
    ) -> list[ProcessRow]:
        processes = [
            p
            for gpu in snapshot.gpus
            for p in gpu.processes
            if only_gpu is None or p.physical_index == only_gpu
        ]
        processes = self._ordered(processes, sort_key, reverse)
        known, self._fixed = self._fixed, {}
        self._health = {
            gpu.physical_index: gpu.health
            for gpu in snapshot.gpus
            if gpu.health is not None and gpu.health.xid_events
        }
        slurm = slurm_of_pid or {}
        now, row = snapshot.timestamp, self._row
        return [row(p, now, job_of_pid, known, slurm) for p in processes]

    def resort(self) -> None:
        """The next refresh sorts exactly by what is shown (``o``): no margin holds a row."""
        self._order.resort()

    def _ordered(
        self, processes: list[GpuProcess], sort_key: SortKey, reverse: bool
    ) -> list[GpuProcess]:
        """``processes`` in the held order: values within the key's margin keep their places."""
        by_place: dict[tuple[Any, ...], GpuProcess] = {}
        for process in processes:
            place: tuple[Any, ...] = (process.pid, process.physical_index, process.mig_uuid)
            while place in by_place:  # the same process listed twice: both rows stay
                place = (*place, 0)
            by_place[place] = process
        descending, amounts_descending = sort_key.directions(reverse)
        order = self._order.order(
            {place: sort_key.key(p) for place, p in by_place.items()},
            sort_key.margin,
            descending,
            (sort_key.name, reverse),
            amounts_descending,
        )
        return [by_place[place] for place in order]

    def _row(
        self,
        process: GpuProcess,
        now: float,
        job_of_pid: Mapping[int, int],
        known: dict[tuple[int, int, int | None], tuple[tuple[Any, ...], _Fixed]],
        slurm_of_pid: Mapping[int, int],
    ) -> ProcessRow:
        job_id = job_of_pid.get(process.pid)
        slurm_id = slurm_of_pid.get(process.pid)
        health = self._health.get(process.physical_index) if self._health else None
        xids = None if health is None else xids_since(health, process.start_time)
        identity = (
            process.pid,
            process.physical_index,
            process.user,
            process.command,
            process.hint,
            process.mig_uuid,
            process.gpu_instance_id,
            job_id,
            slurm_id,
            process.cuda,
            xids,
        )
        place = (process.pid, process.physical_index, process.gpu_instance_id)
        kept = known.get(place)
        if kept is not None and kept[0] == identity:
            self._fixed[place] = kept
            fixed = kept[1]
        else:
            fixed = self._fixed_cells(process, job_id, slurm_id, xids)
            self._fixed[place] = (identity, fixed)
        (gpu, pid, user, command), (gpu_w, pid_w, user_w, command_w), key = fixed
        # Each figure's cell by the number it shows, made once (_bytes_sized, _PERCENTS):
        # 200 rows a second repeat the same few hundred.
        start = process.start_time
        kind, kind_w = _kinds.get(process.type) or _kind_sized(process.type)
        used, used_w = _bytes_sized(process.used_memory_bytes)
        sm_percent = process.sm_util_percent
        sm, sm_w = (
            _PERCENTS[sm_percent]
            if sm_percent is not None and 0 <= sm_percent <= 100
            else _percent_sized(sm_percent)
        )
        cpu_percent = process.cpu_percent
        cpu, cpu_w = _percent_sized(None if cpu_percent is None else round(cpu_percent))
        host, host_w = _bytes_sized(process.host_memory_bytes)
        age, age_w = _age_sized(None if start is None else now - start)
        cells: tuple[Cell, ...] = (gpu, pid, user, kind, used, sm, cpu, host, age, command)
        widths: tuple[int, ...] = (
            gpu_w,
            pid_w,
            user_w,
            kind_w,
            used_w,
            sm_w,
            cpu_w,
            host_w,
            age_w,
            command_w,
        )
        if self._lead is not None:
            cells, widths = (self._lead[0], *cells), (self._lead[1], *widths)
        return _new_row(ProcessRow, (key, process, cells, widths, (), process.user == self.me))

    def _fixed_cells(
        self,
        process: GpuProcess,
        job_id: int | None,
        slurm_id: int | None = None,
        xids: tuple[int, ...] | None = None,
    ) -> _Fixed:
        """The cells that change only with the process itself (and the Xids its card had
        since it started), cleaned and measured."""
        user_style = OWN_USER_STYLE if process.user == self.me else ""
        command: list[Part] = []
        if xids:  # its card reported these since it started (docs/health.md)
            critical = any(describe(code).severity == "critical" for code in xids)
            worst = "critical" if critical else "warning"
            command.append((f"[Xid {', '.join(map(str, xids))}] ", XID_MARK_STYLES[worst]))
        if process.mig_uuid is not None:
            command.append((f"[GI {process.gpu_instance_id}] ", MIG_MARK_STYLE))
        if job_id is not None:
            command.append((f"[job {job_id}] ", JOB_MARK_STYLE))
        if slurm_id is not None:  # docs/slurm.md
            command.append((f"[slurm {slurm_id}] ", SLURM_MARK_STYLE))
        cuda = process.cuda  # its own environment (docs/cuda-visibility.md)
        if cuda is not None and cuda.rank is not None:
            size = "" if cuda.world_size is None else f"/{cuda.world_size}"
            command.append((f"[rank {cuda.rank}{size}] ", RANK_MARK_STYLE))
        if cuda is not None and cuda.mismatch:
            command.append(("[not its cuda card] ", MISMATCH_MARK_STYLE))
        if process.command:
            command.append((clean_argv(process.command), ""))
        else:
            command.append((f"({clean(process.hint or 'unknown')})", HINT_STYLE))
        cells: tuple[Cell, ...] = (
            _plain(str(process.physical_index)),
            _plain(str(process.pid)),
            ((clean(process.user or "?"), user_style),),
            tuple(command),
        )
        widths = tuple(sum(cell_len(text) for text, _ in cell) for cell in cells)
        return cells, widths, self._key_prefix + row_key(process)
