"""Per-GPU readings over time, read back from the history store: for ``gputop report
--plot`` (a window cut into columns) and for the dashboard's sparklines (the last minutes,
one value per second). A sample stands for the ``duration_s`` seconds before its ``t``
(docs/history.md); a column or second no sample covers is ``None``, a gap stays a gap.
"""

from __future__ import annotations

import math
import sqlite3

from gputop.core.numbers import within
from gputop.core.records import frozen


@frozen
class GpuSeries:
    physical_index: int
    uuid: str | None
    utilization_percent: tuple[float | None, ...]
    memory_used_bytes: tuple[float | None, ...]
    memory_total_bytes: int | None
    sm_active_percent: tuple[float | None, ...] = ()
    """GPM's SM active, tensor active and DRAM per column (docs/activity.md); ``None`` where
    nothing was recorded, all ``None`` on a card without GPM."""
    tensor_active_percent: tuple[float | None, ...] = ()
    dram_active_percent: tuple[float | None, ...] = ()


def read_back(value: object, top: float = math.inf) -> float | None:
    """A reading read back from the store: finite, not negative (at most ``top``)."""
    if isinstance(value, (int, float)) and within(value, 0, top):  # not a bool, NaN or inf
        return float(value)
    return None


def gpu_series(
    connection: sqlite3.Connection,
    since: float,
    until: float,
    columns: int,
    card: tuple[int, str] | None = None,
) -> list[GpuSeries]:
    """Each GPU's time-weighted mean utilisation and memory in ``columns`` equal slices of
    ``[since, until)``, by physical index. ``card`` (its index now, its UUID): that one
    card's rows only, under that index, found by UUID wherever it was (a renumbered card
    keeps its history, a replaced one does not inherit another's); a row that names no
    card (an older recorder's) counts where the index matches."""
    width = (until - since) / columns
    key, only_card = "g.physical_index", ""
    chosen: tuple[object, ...] = ()
    if card is not None:
        key = "?"
        only_card = "AND (uuids.text = ? OR (g.uuid_id IS NULL AND g.physical_index = ?)) "
        chosen = (card[1], card[0])
    rows = connection.execute(
        f"SELECT {key} AS card, uuids.text, CAST((s.t - ?) / ? AS INTEGER) AS col, "
        "SUM(g.utilization_gpu_percent * s.duration_s) / "
        "SUM(CASE WHEN g.utilization_gpu_percent IS NOT NULL THEN s.duration_s END), "
        "SUM(g.memory_used_bytes * s.duration_s) / "
        "SUM(CASE WHEN g.memory_used_bytes IS NOT NULL THEN s.duration_s END), "
        "MAX(g.memory_total_bytes), "
        + ", ".join(_WEIGHTED.format(column) for column in _ACTIVITY)
        + " FROM samples s JOIN gpu_samples g ON g.sample_id = s.id "
        "LEFT JOIN strings uuids ON uuids.id = g.uuid_id "
        f"WHERE s.t >= ? AND s.t < ? {only_card}GROUP BY card, col ORDER BY card",
        (*(card[:1] if card is not None else ()), since, width, since, until, *chosen),
    )
    found: dict[int, tuple[str | None, list[list[float | None]], list[int]]] = {}
    for index, uuid, column, utilization, memory, total, *activity in rows:
        if not isinstance(index, int) or not isinstance(column, int) or not 0 <= column < columns:
            continue
        if card is not None:
            uuid = card[1]
        entry = found.setdefault(index, (uuid, [[None] * columns for _ in range(5)], []))
        entry[1][0][column] = read_back(utilization, 100.0)
        entry[1][1][column] = read_back(memory)
        for position, value in enumerate(activity, start=2):
            entry[1][position][column] = read_back(value, 100.0)
        total_bytes = read_back(total)
        if total_bytes is not None:
            entry[2].append(int(total_bytes))
    return [
        GpuSeries(
            index,
            uuid,
            tuple(util),
            tuple(memory),
            max(totals) if totals else None,
            tuple(sm),
            tuple(tensor),
            tuple(dram),
        )
        for index, (uuid, (util, memory, sm, tensor, dram), totals) in sorted(found.items())
    ]


def card_series(
    connection: sqlite3.Connection,
    since: float,
    until: float,
    columns: int,
    physical_index: int,
    uuid: str | None,
) -> GpuSeries | None:
    """One card's ``gpu_series``: by ``uuid`` where it is known, else by its index; None
    where nothing of it was recorded in the window."""
    card = None if uuid is None else (physical_index, uuid)
    found = gpu_series(connection, since, until, columns, card)
    return next((one for one in found if one.physical_index == physical_index), None)


_ACTIVITY = ("sm_active_percent", "tensor_active_percent", "dram_active_percent")
_WEIGHTED = "SUM(g.{0} * s.duration_s) / SUM(CASE WHEN g.{0} IS NOT NULL THEN s.duration_s END)"


def recorded_span(
    connection: sqlite3.Connection, since: float, until: float
) -> tuple[float, float] | None:
    """The part of ``[since, until)`` that samples cover: a plot need not be mostly empty."""
    first, last = connection.execute(
        "SELECT MIN(t - duration_s), MAX(t) FROM samples WHERE t >= ? AND t < ?", (since, until)
    ).fetchone()
    start, end = read_back(first), read_back(last)
    if start is None or end is None:
        return None
    start, end = max(since, start), min(until, end + 1e-3)
    return (start, end) if end > start else None


def plot_columns_for(
    connection: sqlite3.Connection, since: float, until: float, columns: int
) -> int:
    """At most ``columns``, each at least one and a half sample intervals wide: a column
    narrower than the samples would show every other one empty (a short recording)."""
    (mean,) = connection.execute(
        "SELECT AVG(duration_s) FROM samples WHERE t >= ? AND t < ?", (since, until)
    ).fetchone()
    step = read_back(mean)
    if step is None or step <= 0:
        return columns
    return max(1, min(columns, math.floor((until - since) / (1.5 * step))))


def recent_utilization(
    connection: sqlite3.Connection, now: float, seconds: int
) -> dict[str, tuple[int | None, ...]]:
    """Utilisation for each of the ``seconds`` before ``now``, oldest first, by UUID: what
    the dashboard's sparklines start with (``UtilizationHistory.seed``)."""
    start = now - seconds
    rows = connection.execute(
        "SELECT uuids.text, s.t, s.duration_s, g.utilization_gpu_percent "
        "FROM samples s JOIN gpu_samples g ON g.sample_id = s.id "
        "JOIN strings uuids ON uuids.id = g.uuid_id "
        "WHERE s.t > ? AND s.t - s.duration_s < ? ORDER BY s.t",
        (start, now),
    )
    result: dict[str, list[int | None]] = {}
    for uuid, t, duration, utilization in rows:
        end, length, value = read_back(t), read_back(duration), read_back(utilization, 100.0)
        if not isinstance(uuid, str) or end is None or length is None:
            continue
        series = result.setdefault(uuid, [None] * seconds)
        first = max(0, math.floor(end - length - start))
        last = min(seconds, math.ceil(end - start))
        for second in range(first, last):
            series[second] = None if value is None else round(value)
    return {uuid: tuple(values) for uuid, values in result.items()}


BLOCKS = " ▁▂▃▄▅▆▇█"
GAP = "·"
"""A slice with no sample: the recorder was not running, or the GPU was lost."""


def bars(values: tuple[float | None, ...], top: float | None) -> str:
    """One block character a value, scaled to ``top``; ``GAP`` where nothing was recorded."""
    cells = []
    for value in values:
        if value is None or not top:
            cells.append(GAP)
        else:
            level = round(min(1.0, value / top) * (len(BLOCKS) - 1))
            cells.append(BLOCKS[max(1, level)])
    return "".join(cells)
