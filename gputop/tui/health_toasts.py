"""One toast for the Xids that arrived since the last sample (docs/health.md): many at once,
on one card or several, are coalesced into one notification with their counts."""

from __future__ import annotations

from gputop.core.model import Snapshot
from gputop.core.records import frozen
from gputop.core.xid import describe

MAX_LINES = 3
"""Cards named in one toast; the rest are counted."""


@frozen
class XidToast:
    text: str
    critical: bool


class XidToasts:
    """Remembers each card's Xid counts between samples; the first sample only sets them
    (what came before the dashboard shows on the cards' badges, not as news)."""

    def __init__(self) -> None:
        self._counts: dict[str, dict[int, int]] | None = None

    def new(self, snapshot: Snapshot) -> XidToast | None:
        """The toast for what arrived since the last call, or ``None``."""
        counts = {
            gpu.uuid or str(gpu.physical_index): dict(gpu.health.xid_counts)
            for gpu in snapshot.gpus
            if gpu.health is not None
        }
        before, self._counts = self._counts, counts
        if before is None:
            return None
        lines: list[str] = []
        critical = False
        for gpu in snapshot.gpus:
            now = counts.get(gpu.uuid or str(gpu.physical_index))
            if not now:
                continue
            then = before.get(gpu.uuid or str(gpu.physical_index), {})
            arrived = {
                code: n - then.get(code, 0) for code, n in now.items() if n > then.get(code, 0)
            }
            if not arrived:
                continue
            parts = []
            for code, n in sorted(arrived.items()):
                info = describe(code)
                critical = critical or info.severity == "critical"
                parts.append(f"{f'{n}x ' if n > 1 else ''}Xid {code} {info.short}")
            lines.append(f"GPU {gpu.physical_index}: {', '.join(parts)}")
        if not lines:
            return None
        shown = lines[:MAX_LINES]
        if len(lines) > MAX_LINES:
            shown.append(f"and {len(lines) - MAX_LINES} more cards")
        return XidToast("\n".join(shown), critical)
