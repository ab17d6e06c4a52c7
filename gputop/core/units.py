"""Plain-text formatting of readings, shared by the CLI and the dashboard."""

from __future__ import annotations

NA = "N/A"
MIB = 1024 * 1024


def mib(value_bytes: int | None) -> str:
    return NA if value_bytes is None else f"{value_bytes // MIB}"


def memory_pair(used_bytes: int | None, total_bytes: int | None) -> str:
    return f"{mib(used_bytes)} / {mib(total_bytes)} MiB"


def human_bytes(value_bytes: int | None) -> str:
    """Short sizes for narrow columns: 812M, 3.2G."""
    if value_bytes is None:
        return NA
    if value_bytes >= 1024**3:
        return f"{value_bytes / 1024**3:.1f}G"
    return f"{value_bytes // MIB}M"


def percent(value: float | None, width: int = 3) -> str:
    return NA.rjust(width) + " " if value is None else f"{value:>{width}.0f} %"


def watts(value: float | None) -> str:
    return NA if value is None else f"{value:.0f} W"


def celsius(value: int | None) -> str:
    return NA if value is None else f"{value}°C"


def duration(seconds: float | None) -> str:
    """Elapsed time as ps shows it, for the CLI: 42:07, 3:12:05, 2-04:00:00."""
    if seconds is None or seconds < 0:
        return NA
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def duration_coarse(seconds: float | None, *, seconds_below_minute: bool = False) -> str:
    """Elapsed time to the minute, for the dashboard: 3m, 5h21m, 2d04h (a steady machine
    then repaints nothing). ``seconds_below_minute``: 42s rather than 0m, where a young
    entry is worth watching (a job just launched)."""
    if seconds is None or seconds < 0:
        return NA
    if seconds_below_minute and seconds < 60:
        return f"{seconds:.0f}s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
