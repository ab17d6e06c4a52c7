"""A card's verdict from its health readings: ok, warning or critical, with the reasons and
what to do (docs/health.md).

Only signs that a card needs attention count. PCIe replays and NVLink CRC errors are shown
but do not change the verdict on their own: healthy links count a few, and without a rate
over time a total says little.
"""

from __future__ import annotations

from typing import Literal

from gputop.core.model import GpuHealth
from gputop.core.records import frozen
from gputop.core.xid import describe

Level = Literal["ok", "warning", "critical"]
LEVELS: dict[Level, int] = {"ok": 0, "warning": 1, "critical": 2}
"""The exporter's ``gputop_gpu_health`` value of each verdict."""


@frozen
class Reason:
    level: Level
    text: str
    """What is wrong, in a few words: ``row remap pending``."""
    action: str
    short: str | None = None
    """For a card's badge, where it differs from ``text``: ``row remap pending: reset``."""


@frozen
class Verdict:
    level: Level
    reasons: tuple[Reason, ...] = ()
    """Most severe first."""

    @property
    def action(self) -> str | None:
        """What to do first: the most severe reason's action."""
        return self.reasons[0].action if self.reasons else None

    @property
    def value(self) -> int:
        return LEVELS[self.level]

    def as_json(self) -> dict[str, object]:
        """``snapshot --json``'s verdict, reasons and action (a local card's, a fleet card's)."""
        reasons = [{"level": r.level, "reason": r.text, "action": r.action} for r in self.reasons]
        return {"verdict": self.level, "reasons": reasons, "action": self.action}


OK = Verdict("ok")


def verdict(health: GpuHealth | None) -> Verdict:
    """The verdict on ``health``; ok where nothing is known to be wrong."""
    if health is None:
        return OK
    rows, ecc, pages = health.remapped_rows, health.ecc, health.retired_pages
    ecc_errors = ecc.uncorrected_volatile if ecc is not None else 0
    signs: tuple[tuple[object, Level, str, str, str], ...] = (
        (
            rows is not None and rows.failed,
            "critical",
            "row remapping failed",
            "reset the GPU, then watch it; replace the board if errors go on",
            "row remap failed: reset",
        ),
        (
            ecc_errors,
            "critical",
            f"{ecc_errors} uncorrectable ECC errors this boot",
            "results of jobs on it may be wrong: rerun them; reset the GPU",
            f"{ecc_errors} uncorrectable ECC",
        ),
        (
            rows is not None and rows.pending,
            "warning",
            "row remap pending",
            "reset the GPU when it is idle",
            "row remap pending: reset",
        ),
        (
            pages is not None and pages.pending,
            "warning",
            "retired pages pending",
            "reset the GPU, then watch it",
            "pages pending: reset",
        ),
    )
    reasons = [
        Reason(level, text, action, short) for found, level, text, action, short in signs if found
    ]
    xids = _xid_reasons(health)
    ordered = [
        *(r for r in xids if r.level == "critical"),  # Xid 79 before what it explains
        *(r for r in reasons if r.level == "critical"),
        *(r for r in reasons if r.level == "warning"),
        *(r for r in xids if r.level == "warning"),
    ]
    if not ordered:
        return OK
    return Verdict(ordered[0].level, tuple(ordered))


def _xid_reasons(health: GpuHealth) -> list[Reason]:
    """One reason per Xid code, newest first, with how many of it came in all."""
    totals = dict(health.xid_counts)
    seen: set[int] = set()
    reasons = []
    for event in reversed(health.xid_events or ()):
        if event.xid in seen:
            continue
        seen.add(event.xid)
        info = describe(event.xid)
        count = totals.get(event.xid, event.count)
        times = f" ({count}x)" if count > 1 else ""
        reasons.append(Reason(info.severity, f"Xid {event.xid} {info.short}{times}", info.action))
    return reasons


def xids_since(health: GpuHealth | None, since: float | None) -> tuple[int, ...] | None:
    """The Xid codes a card reported at or after ``since`` (a process's start), each once,
    oldest first; ``None`` where that cannot be known (no Xid source, no start time). A
    coalesced run counts from its first Xid's time."""
    if health is None or health.xid_events is None or since is None:
        return None
    return tuple(dict.fromkeys(e.xid for e in health.xid_events if e.time >= since))


def badge(result: Verdict) -> str | None:
    """A few words for a card that is not ok: ``⚠ row remap pending: reset``, ``✖ Xid 79
    fell off the bus (+1)`` (``+1``: one reason more, on the health line or screen)."""
    if not result.reasons:
        return None
    first = result.reasons[0]
    more = f" (+{len(result.reasons) - 1})" if len(result.reasons) > 1 else ""
    return f"{mark(result)} {first.short or first.text}{more}"


def mark(result: Verdict) -> str:
    """``✖`` critical, ``⚠`` warning, nothing for ok."""
    return {"critical": "✖", "warning": "⚠"}.get(result.level, "")
