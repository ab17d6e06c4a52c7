"""The ranks of one distributed job, kept together in the process table, and collapsible.

Ranks share their rendezvous (``rendezvous_key``, read from each process's environment).
They follow each other in rank order where the first of them falls in the sort; ``r``
collapses them into one line with the job's total GPU and host memory, or expands it.
"""

from __future__ import annotations

from collections.abc import Collection

from rich.cells import cell_len

from gputop.core.model import GpuProcess
from gputop.core.process_detail import rendezvous_key
from gputop.core.safe_text import clean
from gputop.core.units import human_bytes
from gputop.tui.widgets.process_rows import COLUMNS, Cell, ProcessRow

GroupKey = tuple[str, int, str]
GROUP_MARK_STYLE = "bold cyan"


def _rank(process: GpuProcess) -> int:
    cuda = process.cuda
    return cuda.rank if cuda is not None and cuda.rank is not None else 1 << 30


def group_ranks(rows: list[ProcessRow], collapsed: Collection[GroupKey]) -> list[ProcessRow]:
    """``rows`` with each job's ranks together (rank order); a collapsed job as one line."""
    groups: dict[GroupKey, list[ProcessRow]] = {}
    for row in rows:
        key = rendezvous_key(row.process)
        if key is not None:
            groups.setdefault(key, []).append(row)
    if not any(len(members) > 1 for members in groups.values()):
        return rows
    result: list[ProcessRow] = []
    placed: set[GroupKey] = set()
    for row in rows:
        key = rendezvous_key(row.process)
        members = groups.get(key) if key is not None else None
        if key is None or members is None or len(members) < 2:
            result.append(row)
            continue
        if key in placed:
            continue
        placed.add(key)
        ordered = sorted(members, key=lambda member: _rank(member.process))
        result.extend([summary_row(key, ordered)] if key in collapsed else ordered)
    return result


def summary_row(key: GroupKey, ranks: list[ProcessRow]) -> ProcessRow:
    """One line for a collapsed job: its cards, its rank count, its total memory."""
    first = ranks[0]
    lead = len(first.cells) - len(COLUMNS)  # the lab's HOST column comes first
    processes = tuple(row.process for row in ranks)
    gpu_memory = sum(p.used_memory_bytes or 0 for p in processes)
    host_memory = sum(p.host_memory_bytes or 0 for p in processes)
    addr, port, _ = key
    texts = {
        0: ",".join(dict.fromkeys(str(p.physical_index) for p in processes)),
        1: f"▸ {len(processes)} ranks",
        3: "",
        4: human_bytes(gpu_memory),
        5: "",
        6: "",
        7: human_bytes(host_memory),
    }
    cells = list(first.cells)
    widths = list(first.widths)
    for column, text in texts.items():
        cells[lead + column] = ((text, ""),)
        widths[lead + column] = cell_len(text)
    mark = f"[ranks of {clean(addr)}:{port}] "
    command: Cell = ((mark, GROUP_MARK_STYLE), *first.cells[lead + 9])
    cells[lead + 9] = command
    widths[lead + 9] = cell_len(mark) + first.widths[lead + 9]
    return ProcessRow(
        key=f"ranks:{clean(addr)}:{port}:{key[2]}",
        process=first.process,
        cells=tuple(cells),
        widths=tuple(widths),
        group=processes,
        mine=first.mine,
    )
