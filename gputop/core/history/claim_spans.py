"""Claims in the history store: who held which card by a claim, and how long of that it
sat idle (docs/claims.md, docs/history.md).

One row per user and card and stretch of at most ``CLAIM_SPAN_MAX_S``: the seconds claimed and
the seconds of those in which the card's utilisation was known and under 5 %. A few rows an
hour for a claimed card, none for an unclaimed one; ``gputop report`` sums them per user.
"""

from __future__ import annotations

import math
import sqlite3

from gputop.core.history.spans import IDLE_SM_PERCENT, save_span
from gputop.core.model import GpuSample
from gputop.core.records import frozen, mutable

CLAIM_SPAN_MAX_S = 3600.0
_GAP_S = 1.0

SCHEMA = (
    "CREATE TABLE claim_spans ("
    " id INTEGER PRIMARY KEY,"
    " user_id INTEGER NOT NULL,"
    " uuid_id INTEGER,"
    " physical_index INTEGER NOT NULL,"
    " start_t REAL NOT NULL,"
    " end_t REAL NOT NULL,"
    " claimed_s REAL NOT NULL,"
    " idle_s REAL NOT NULL"
    ")",
    "CREATE INDEX claim_spans_by_end ON claim_spans(end_t)",
)


@mutable
class OpenClaimSpan:
    user_id: int
    uuid_id: int | None
    physical_index: int
    start_t: float
    end_t: float
    claimed_s: float = 0.0
    idle_s: float = 0.0
    row_id: int | None = None
    dirty: bool = True

    def continues(self, start_t: float) -> bool:
        return abs(self.end_t - start_t) <= _GAP_S and self.end_t - self.start_t < CLAIM_SPAN_MAX_S

    def add(self, gpu: GpuSample, end_t: float, duration_s: float) -> None:
        self.end_t = end_t
        self.claimed_s += duration_s
        if is_idle_card(gpu):
            self.idle_s += duration_s
        self.dirty = True

    def save(self, connection: sqlite3.Connection) -> None:
        changing = {"end_t": self.end_t, "claimed_s": self.claimed_s, "idle_s": self.idle_s}
        fixed = {name: getattr(self, name) for name in _FIXED}
        self.row_id = save_span(connection, "claim_spans", self.row_id, changing, fixed)
        self.dirty = False


_FIXED = ("user_id", "uuid_id", "physical_index", "start_t")


def is_idle_card(gpu: GpuSample) -> bool:
    """Utilisation known and under 5 %: nobody is computing on it."""
    util = gpu.utilization_gpu_percent
    return util is not None and util < IDLE_SM_PERCENT


@frozen
class ClaimedTime:
    """One user's claims in a window: seconds claimed (summed over cards) and idle."""

    user: str
    claimed_s: float
    idle_s: float

    def to_json(self) -> dict[str, object]:
        return {"user": self.user, "claimed_seconds": self.claimed_s, "idle_seconds": self.idle_s}


def claimed_time(connection: sqlite3.Connection, since: float, until: float) -> list[ClaimedTime]:
    """Per user, most idle first: each span counts by the part of it inside the window (a
    span is at most an hour, so the window's edges are exact to within that part). A store
    without the table (written before claims were recorded) has none."""
    try:
        rows = connection.execute(
            "SELECT COALESCE(u.text, '?'), c.start_t, c.end_t, c.claimed_s, c.idle_s "
            "FROM claim_spans c LEFT JOIN strings u ON u.id = c.user_id "
            "WHERE c.end_t > ? AND c.start_t < ?",
            (since, until),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    totals: dict[str, list[float]] = {}
    for user, start_t, end_t, claimed_s, idle_s in rows:
        numbers = (start_t, end_t, claimed_s, idle_s)
        if not all(isinstance(n, (int, float)) and math.isfinite(n) for n in numbers):
            continue  # a damaged row never invents time
        if end_t < start_t or claimed_s < 0 or not 0 <= idle_s <= claimed_s:
            continue
        length = end_t - start_t
        inside = min(end_t, until) - max(start_t, since)
        share = 1.0 if length <= 0 else max(0.0, min(1.0, inside / length))
        sums = totals.setdefault(str(user), [0.0, 0.0])
        sums[0] += claimed_s * share
        sums[1] += idle_s * share
    found = [ClaimedTime(user, claimed, idle) for user, (claimed, idle) in totals.items()]
    return sorted(found, key=lambda t: (-t.idle_s, -t.claimed_s, t.user))
