"""One card's history for the dashboard (``H``): its utilisation and memory over a window,
and who held it, read from the history store off the UI thread (docs/history.md)."""

from __future__ import annotations

import sqlite3
from dataclasses import field
from pathlib import Path

from gputop.core.history.report import ReportQuery, ReportRow, build_report
from gputop.core.history.series import GpuSeries, card_series
from gputop.core.history.store import HistoryError, open_for_reading
from gputop.core.records import frozen

WINDOWS_S = {"1": 3600.0, "2": 86400.0, "3": 7 * 86400.0}
"""The keys of the history screen and the windows they show: 1 h, 24 h, 7 d."""


@frozen
class CardHistory:
    physical_index: int
    since: float
    until: float
    series: GpuSeries | None = None
    holders: tuple[ReportRow, ...] = field(default_factory=tuple)
    problem: str | None = None
    """Why there is nothing to show (no store, a store that cannot be read), for a person."""


def read_card_history(
    path: Path,
    physical_index: int,
    window_s: float,
    now: float,
    columns: int,
    uuid: str | None = None,
) -> CardHistory:
    """The card's history: by ``uuid`` where it is known (a replaced or renumbered card
    has its own history, not that of the card once at its index), else by its index."""
    since = now - window_s
    try:
        connection = open_for_reading(path)
    except HistoryError as error:
        return CardHistory(physical_index, since, now, problem=str(error))
    try:
        series = card_series(connection, since, now, columns, physical_index, uuid)
        query = ReportQuery(since, now, physical_index=physical_index, uuid=uuid)
        holders = tuple(build_report(connection, query))
    except sqlite3.Error as error:
        return CardHistory(physical_index, since, now, problem=f"Cannot read {path}: {error}.")
    finally:
        connection.close()
    return CardHistory(physical_index, since, now, series, holders)
