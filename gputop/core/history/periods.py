"""Durations (``90m``, ``24h``, ``7d``) and moments (a duration ago, or an ISO date/time).

Parsed strictly: ASCII digits and one unit, or an ISO 8601 date or date and time; anything
else is refused with a message that shows a form that is accepted.
"""

from __future__ import annotations

import datetime as dt
import re

from gputop.core.errors import UsageError
from gputop.core.numbers import LATEST_TIME_S

UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_DURATION_S = 100 * 365 * 86400.0
_DURATION = re.compile(r"([0-9]+)([smhdw])")
_MAX_DURATION_DIGITS = 10
"""More significant digits than this is longer than ``MAX_DURATION_S`` in any unit."""
_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9:.+\-Z]+)?")
EARLIEST_S = 0.0
"""1970-01-01T00:00Z: nothing was recorded before it; a duration that reaches further back
means since then."""
LATEST_S = LATEST_TIME_S - 2 * 86400
"""Two days before the end of year 9999: any time zone can still show it as a date."""
DURATION_FORMS = "a number and a unit: 90s, 90m, 24h, 7d or 2w"
TIME_FORMS = (
    f"a duration ago ({DURATION_FORMS}) or an ISO date or date and time: 2026-11-24, "
    "2026-11-24T08:30 or 2026-11-24T08:30+01:00"
)


def parse_duration(text: str, what: str) -> float:
    """Seconds from ``90m``, ``24h``, ``7d``; ``what`` names the option in the message."""
    match = _DURATION.fullmatch(text.strip()) if text.isascii() else None
    if match is None:
        raise UsageError(f"{what} {text!r} is not a duration: give {DURATION_FORMS}.")
    digits = match.group(1).lstrip("0")
    if len(digits) > _MAX_DURATION_DIGITS:  # a whole number, too large: never int() on it
        raise UsageError(_too_long(what, text))
    seconds = int(digits or "0") * UNITS_S[match.group(2)]
    if seconds > MAX_DURATION_S:
        raise UsageError(_too_long(what, text))
    return float(seconds)


def _too_long(what: str, text: str) -> str:
    shown = repr(text) if len(text) <= 40 else f"{text[:24]!r}... ({len(text)} characters)"
    return f"{what} {shown} is too long: give at most a hundred years (36500d)."


def parse_moment(text: str, what: str, now: float) -> float:
    """Epoch seconds: ``now`` minus a duration, or an ISO date/time (local time unless it
    names an offset)."""
    stripped = text.strip()
    if _DURATION.fullmatch(stripped) and stripped.isascii():
        return max(EARLIEST_S, now - parse_duration(stripped, what))
    moment = None
    if stripped.isascii() and _ISO.fullmatch(stripped):
        try:
            moment = dt.datetime.fromisoformat(stripped.replace("Z", "+00:00"))
        except ValueError:
            moment = None
    if moment is None:
        raise UsageError(f"{what} {text!r} is not a time: give {TIME_FORMS}.")
    try:
        if moment.tzinfo is None:
            moment = moment.astimezone()  # a naive time is local time
        epoch = moment.timestamp()
    except (ValueError, OverflowError, OSError):  # year 1 in local time, say
        epoch = None
    if epoch is None or not EARLIEST_S <= epoch <= LATEST_S:
        raise UsageError(
            f"{what} {text!r} is outside the times gputop reports on: give a time from "
            "1970-01-01 to 9999-12-29."
        )
    return epoch
