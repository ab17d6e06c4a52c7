"""Plain-text formatting of readings, shared by the CLI and the dashboard."""

from __future__ import annotations

import time

NA = "N/A"
MIB = 1024 * 1024


def local_time(epoch: float, *, seconds: bool = True) -> str:
    """``2026-01-02 14:05:09`` in the local time zone; ``2026-01-02 14:05`` without seconds."""
    form = "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    return time.strftime(form, time.localtime(epoch))


def counted(count: int, noun: str) -> str:
    """``1 GPU``, ``2 GPUs``, ``0 hosts``: a count and its noun, singular for one."""
    return f"{count} {noun if count == 1 else noun + 's'}"


def mib(value_bytes: int | None) -> str:
    return NA if value_bytes is None else f"{value_bytes // MIB}"


def memory_pair(used_bytes: int | None, total_bytes: int | None) -> str:
    """Used / total GPU memory, in MiB as nvidia-smi counts it (docs/units.md)."""
    return f"{mib(used_bytes)} / {mib(total_bytes)} MiB"


def power_pair(draw_w: float | None, limit_w: float | None) -> str:
    """Draw / limit: ``155 / 350 W``, ``N/A / 350 W`` (docs/units.md)."""
    draw = NA if draw_w is None else f"{draw_w:.0f}"
    limit = NA if limit_w is None else f"{limit_w:.0f}"
    return f"{draw} / {limit} W"


def human_bytes(value_bytes: int | None) -> str:
    """Short sizes for narrow columns: 812M, 3.2G."""
    if value_bytes is None:
        return NA
    if value_bytes >= 1024**3:
        return f"{value_bytes / 1024**3:.1f}G"
    return f"{value_bytes // MIB}M"


def percent(value: float | None, width: int = 3) -> str:
    return NA.rjust(width) + " " if value is None else f"{value:>{width}.0f} %"


def celsius(value: int | None) -> str:
    return NA if value is None else f"{value}°C"


def duration(seconds: float | None) -> str:
    """Elapsed time, exact to the second, in the one notation of docs/units.md: 42s, 3m07s,
    3h12m05s, 2d04h00m (days: to the minute). The dashboard's ``duration_coarse`` writes
    the same notation one unit shorter."""
    if seconds is None or seconds < 0:
        return NA
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h{minutes:02d}m"
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def duration_coarse(seconds: float | None, *, seconds_below_minute: bool = False) -> str:
    """Elapsed time to the minute, for the dashboard: <1m, 3m, 5h21m, 2d04h (a steady
    machine then repaints nothing). ``seconds_below_minute``: 42s rather than <1m, where a
    young entry is worth watching (a job just launched)."""
    if seconds is None or seconds < 0:
        return NA
    if seconds < 60:
        # truncated, as ``duration`` does: 38.6 s is 38s on both
        return f"{int(seconds)}s" if seconds_below_minute else "<1m"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
