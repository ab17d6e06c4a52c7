"""The dashboard's sparklines start from the history store when a recorder fills it.

Read at start-up, read-only, in a few milliseconds; no store, or one that cannot be read,
is no history, never an error. A recorder writes in batches, so the store lacks up to a
batch of the last seconds: the dashboard reads the same past again (``refill_read``) until
the store holds a sample from its own start on (``UtilizationHistory.refill``).
"""

from __future__ import annotations

import math
import sqlite3
import time
from pathlib import Path

from gputop.core.history.series import recent_utilization
from gputop.core.history.store import HistoryError, default_history_path, open_for_reading
from gputop.core.numbers import within
from gputop.core.records import frozen
from gputop.core.sampling.history import UtilizationHistory, initial_history


def stored_utilization(
    path: Path, now: float, seconds: int
) -> dict[str, tuple[int | None, ...]] | None:
    """Each GPU's utilisation for the ``seconds`` before ``now`` from the store, by UUID;
    ``None`` where there is no store or nothing recent in it."""
    read = refill_read(path, now, seconds)
    return None if read is None else read.stored


@frozen(slots=False)
class RefillRead:
    stored: dict[str, tuple[int | None, ...]] | None
    """Each GPU's utilisation for the seconds before the dashboard's first reading."""
    complete: bool
    """The store holds a sample from then on: nothing before it is still to be written."""


REFILL_EVERY_S = 10.0
"""How often the dashboard reads its past again while the store still lacks some of it."""


def refill_read(path: Path, live_from: float, seconds: int) -> RefillRead | None:
    """What the store holds now of the ``seconds`` before ``live_from``; None where there is
    no store or it cannot be read (no recorder: nothing will come)."""
    try:
        if not path.exists():  # OSError: a path no file can have (ENAMETOOLONG, EACCES)
            return None
        connection = open_for_reading(path)
    except (HistoryError, OSError):
        return None
    try:
        found = recent_utilization(connection, live_from, seconds)
        row = connection.execute("SELECT MAX(t) FROM samples").fetchone()
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    newest = row[0] if row else None
    complete = within(newest, live_from, math.inf)
    if not any(value is not None for values in found.values() for value in values):
        return RefillRead(None, complete)
    return RefillRead(found, complete)


def dashboard_history(nvml: object, path: Path | None = None) -> UtilizationHistory:
    """The sparklines' history: from the store where a recorder runs, else as before (empty,
    or what simulated GPUs say they read)."""
    clock = getattr(nvml, "epoch_time", None)
    now = clock() if callable(clock) else time.time()
    history = UtilizationHistory()
    seconds = math.ceil(history.length * history.bucket_s)
    stored = stored_utilization(path or default_history_path(), now, seconds)
    if stored is None:
        return initial_history(nvml)
    history.seed(stored, now)
    return history
