"""Short per-GPU history of readings, for the dashboard's sparklines.

Kept by UUID rather than physical index, so a history never jumps to another card if the
driver renumbers GPUs; a missing reading is kept as ``None`` so gaps stay gaps.

A point is the mean of the readings in a bucket of ``bucket_s`` seconds (2 by default), and
a bucket is shown once it is complete: the sparkline then moves every two seconds, not every
refresh. Each move rewrites most of a sparkline's cells, which was most of what the
dashboard sent the terminal each second; the bars and figures beside it stay live.
"""

from __future__ import annotations

import math
from collections import deque

from gputop.core.model import Snapshot

DEFAULT_LENGTH = 120
"""Four minutes of two-second points: more than the widest card shows."""
DEFAULT_BUCKET_S = 2.0


class UtilizationHistory:
    def __init__(self, length: int = DEFAULT_LENGTH, bucket_s: float = DEFAULT_BUCKET_S) -> None:
        self._length = length
        self._bucket_s = bucket_s
        self._by_gpu: dict[str, deque[int | None]] = {}
        self._open: dict[str, list[int | None]] = {}
        """Readings of the bucket not yet complete, by GPU."""
        self._bucket: int | None = None
        self._last_timestamp: float | None = None
        self.live_from: float | None = None
        """When the first reading of this run was taken: what came before is the past, seeded
        (and refilled) from what was stored."""
        self._live_points: dict[str, int] = {}
        """Points of each series made from this run's readings (the newest ones)."""
        self._open_seeded = False
        """The open bucket holds past readings only."""

    def add(self, snapshot: Snapshot) -> None:
        """One reading per GPU; a snapshot of the same moment again (a frozen clock) adds none."""
        if snapshot.timestamp == self._last_timestamp:
            return
        self._last_timestamp = snapshot.timestamp
        if self.live_from is None:
            self.live_from = snapshot.timestamp
        readings = {
            gpu.uuid or f"#{gpu.physical_index}": None if gpu.lost else gpu.utilization_gpu_percent
            for gpu in snapshot.gpus
        }
        self._add_readings(self._bucket_of(snapshot.timestamp), readings, live=True)
        for key in self._by_gpu.keys() - readings.keys():
            del self._by_gpu[key]
            self._live_points.pop(key, None)

    def _bucket_of(self, timestamp: float) -> int:
        return math.floor(timestamp / self._bucket_s)

    def _add_readings(
        self, bucket: int, readings: dict[str, int | None], live: bool = False
    ) -> None:
        if self._bucket is not None and bucket != self._bucket:
            for key, values in self._open.items():
                series = self._by_gpu.setdefault(key, deque(maxlen=self._length))
                series.append(_mean(values))
                if live and not self._open_seeded:
                    self._live_points[key] = self._live_points.get(key, 0) + 1
            self._open = {}
        self._open_seeded = not live
        self._bucket = bucket
        for key, value in readings.items():
            self._open.setdefault(key, []).append(value)
            self._by_gpu.setdefault(key, deque(maxlen=self._length))
        for key in self._open.keys() - readings.keys():
            del self._open[key]

    @property
    def length(self) -> int:
        return self._length

    @property
    def bucket_s(self) -> float:
        return self._bucket_s

    def seed(self, series_by_uuid: dict[str, tuple[int | None, ...]], now: float) -> None:
        """Start with known past readings, one per second up to ``now`` (a simulated clock
        can supply them)."""
        steps = max((len(values) for values in series_by_uuid.values()), default=0)
        for step in range(steps, 0, -1):
            readings = {
                uuid: values[len(values) - step]
                for uuid, values in series_by_uuid.items()
                if step <= len(values)
            }
            self._add_readings(self._bucket_of(now - step), readings)

    def refill(self, series_by_uuid: dict[str, tuple[int | None, ...]]) -> None:
        """The past read again: readings one per second up to ``live_from`` (a recorder's
        store, written in batches, holds more of it now than when the dashboard started).
        Each point before this run's first takes the value read now where it has one; the
        points of this run stay as they are."""
        if self.live_from is None:
            return
        past = UtilizationHistory(self._length, self._bucket_s)
        past.seed(series_by_uuid, self.live_from)
        first_live = self._bucket_of(self.live_from)
        for key, series in self._by_gpu.items():
            earlier: list[int | None] = list(past._by_gpu.get(key, ()))
            if past._bucket is not None and past._bucket != first_live and key in past._open:
                earlier.append(_mean(past._open[key]))  # a whole bucket before this run's
            live = min(self._live_points.get(key, 0), len(series))
            points = list(series)
            before, after = points[: len(points) - live], points[len(points) - live :]
            self._by_gpu[key] = deque(_over(before, earlier) + after, maxlen=self._length)

    def series(self, uuid: str | None, physical_index: int) -> tuple[int | None, ...]:
        return tuple(self._by_gpu.get(uuid or f"#{physical_index}", ()))


def initial_history(nvml: object, length: int = DEFAULT_LENGTH) -> UtilizationHistory:
    """An empty history, or for simulated GPUs the one they would already have.

    A simulated NVML module can say what it read in the past; a real driver cannot.
    """
    history = UtilizationHistory(length)
    recent = getattr(nvml, "recent_utilization", None)
    clock = getattr(nvml, "epoch_time", None)
    if callable(recent) and callable(clock):
        seconds = math.ceil(length * history.bucket_s)
        history.seed(recent(seconds), clock())
    return history


def _over(old: list[int | None], new: list[int | None]) -> list[int | None]:
    """``new`` over ``old``, the two ending at the same point: ``new``'s value where it has
    one, ``old``'s where it has none (a gap in the store, where the simulation had a past)."""
    length = max(len(old), len(new))
    none: list[int | None] = [None]
    old = none * (length - len(old)) + old
    new = none * (length - len(new)) + new
    return [n if n is not None else o for o, n in zip(old, new, strict=True)]


def _mean(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known)) if known else None
