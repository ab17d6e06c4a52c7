"""Short per-GPU history of readings, for the dashboard's sparklines.

Kept by UUID rather than physical index, so a history never jumps to another card if the
driver renumbers GPUs; a missing reading is kept as ``None`` so gaps stay gaps.
"""

from __future__ import annotations

from collections import deque

from gputop.core.model import Snapshot

DEFAULT_LENGTH = 120
"""Two minutes at the default one-second refresh."""


class UtilizationHistory:
    def __init__(self, length: int = DEFAULT_LENGTH) -> None:
        self._length = length
        self._by_gpu: dict[str, deque[int | None]] = {}
        self._last_timestamp: float | None = None

    def add(self, snapshot: Snapshot) -> None:
        """One point per GPU; a snapshot of the same moment again (a frozen clock) adds none."""
        if snapshot.timestamp == self._last_timestamp:
            return
        self._last_timestamp = snapshot.timestamp
        seen = set()
        for gpu in snapshot.gpus:
            key = gpu.uuid or f"#{gpu.physical_index}"
            seen.add(key)
            series = self._by_gpu.setdefault(key, deque(maxlen=self._length))
            series.append(None if gpu.lost else gpu.utilization_gpu_percent)
        for key in self._by_gpu.keys() - seen:
            del self._by_gpu[key]

    @property
    def length(self) -> int:
        return self._length

    def seed(self, series_by_uuid: dict[str, tuple[int | None, ...]]) -> None:
        """Start with known past readings (a simulated clock can supply them)."""
        for uuid, values in series_by_uuid.items():
            self._by_gpu[uuid] = deque(values, maxlen=self._length)

    def series(self, uuid: str | None, physical_index: int) -> tuple[int | None, ...]:
        return tuple(self._by_gpu.get(uuid or f"#{physical_index}", ()))


def initial_history(nvml: object, length: int = DEFAULT_LENGTH) -> UtilizationHistory:
    """An empty history, or for simulated GPUs the one they would already have.

    A simulated NVML module can say what it read in the past; a real driver cannot.
    """
    history = UtilizationHistory(length)
    recent = getattr(nvml, "recent_utilization", None)
    if callable(recent):
        history.seed(recent(length - 1))
    return history
