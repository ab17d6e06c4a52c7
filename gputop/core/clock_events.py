"""NVML's clock event (throttle) reasons: the bit mask, its names, and which ones throttle.

``nvmlDeviceGetCurrentClocksEventReasons`` (``…ThrottleReasons`` on older drivers) answers a
64-bit mask; the bits are nvml.h's ``nvmlClocksEventReason*``. Some say why clocks are where
they are without anything being wrong (the GPU is idle, an application clock was set); the
ones in ``THROTTLING`` mean the card runs slower than it could. See docs/activity.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputop.core.numbers import whole_within

REASONS: tuple[tuple[int, str, str], ...] = (
    (0x1, "gpu_idle", "idle"),
    (0x2, "applications_clocks_setting", "app clocks"),
    (0x4, "sw_power_cap", "power cap"),
    (0x8, "hw_slowdown", "hw slowdown"),
    (0x10, "sync_boost", "sync boost"),
    (0x20, "sw_thermal_slowdown", "thermal"),
    (0x40, "hw_thermal_slowdown", "hw thermal"),
    (0x80, "hw_power_brake_slowdown", "power brake"),
    (0x100, "display_clock_setting", "display clock"),
)
"""(bit, name in JSON, short label for a badge)."""
THROTTLING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
"""Power cap, hardware slowdown, thermal (software and hardware), power brake."""
MAX_MASK = 2**64 - 1
_KNOWN = {bit: name for bit, name, _ in REASONS}
_LABELS = {bit: label for bit, _, label in REASONS}


def valid_mask(value: object) -> int | None:
    """``value`` as a mask, or ``None`` when it is not a 64-bit unsigned integer."""
    return value if whole_within(value, 0, MAX_MASK) else None


def reason_names(mask: int) -> list[str]:
    """Every bit set in ``mask`` by nvml.h's name (``bit_N`` for a bit nvml.h does not name),
    lowest bit first."""
    return [_KNOWN.get(1 << bit, f"bit_{bit}") for bit in range(64) if mask >> bit & 1]


def mask_from_names(names: Iterable[str]) -> int:
    """The inverse of ``reason_names`` for names it knows; others raise ValueError."""
    by_name = {name: bit for bit, name, _ in REASONS}
    mask = 0
    for name in names:
        if name in by_name:
            mask |= by_name[name]
        elif name.startswith("bit_") and name[4:].isdigit() and int(name[4:]) < 64:
            mask |= 1 << int(name[4:])
        else:
            raise ValueError(name)
    return mask


def throttling(mask: int | None) -> bool:
    return mask is not None and bool(mask & THROTTLING)


def badge_labels(mask: int | None) -> list[str]:
    """Short labels of the throttling reasons in ``mask``: what the card badge says."""
    if mask is None:
        return []
    return [_LABELS[bit] for bit, _, _ in REASONS if bit & THROTTLING and mask & bit]
