"""One CUDA_VISIBLE_DEVICES entry, read the way the driver reads it.

The value is split on commas only (rule 3). An integer entry is read like C's
``strtoul(entry, 10)``: leading whitespace, one optional sign, then digits up to the first
non-digit, whose rest is ignored (rule 4): ``1gpu2`` is 1, ``+3`` is 3, ``-0`` is 0, ``0x1``
is 0. No digits makes the entry invalid (rule 5); a negative number wraps to a huge value
under strtoul and is invalid too (rule 6). Entries starting with ``GPU-`` or ``MIG-`` name
devices by UUID (rules 11, 19, 20).
"""

from __future__ import annotations

import re

from gputop.core.records import frozen

_WHITESPACE = " \t\n\r\v\f"
ULONG_MAX = 2**64 - 1
"""What strtoul gives for a number past it (int() of thousands of digits raises instead)."""
_LEGACY_MIG = re.compile(r"^MIG-(GPU-[^/]+)/([0-9]+)/([0-9]+)$")


@frozen
class IntegerEntry:
    value: int
    ignored: str = ""
    """What follows the number, which the driver ignores (``1 2`` is 1, `` 2`` ignored);
    blanks alone are not counted."""


@frozen
class GpuUuidEntry:
    prefix: str


@frozen
class MigUuidEntry:
    prefix: str


@frozen
class LegacyMigEntry:
    """``MIG-GPU-<gpu uuid or prefix>/<GPU instance>/<compute instance>`` (before R470)."""

    gpu_prefix: str
    gpu_instance_id: int
    compute_instance_id: int


@frozen
class InvalidEntry:
    reason: str


Entry = IntegerEntry | GpuUuidEntry | MigUuidEntry | LegacyMigEntry | InvalidEntry


def split_entries(value: str) -> list[str]:
    return value.split(",")


def parse_entry(raw: str) -> Entry:
    text = raw.lstrip(_WHITESPACE)
    if text.startswith("MIG-"):
        legacy = _LEGACY_MIG.match(text.rstrip(_WHITESPACE))
        if legacy:
            return LegacyMigEntry(legacy.group(1), _ulong(legacy.group(2)), _ulong(legacy.group(3)))
        return MigUuidEntry(text.rstrip(_WHITESPACE))
    if text.startswith("GPU-"):
        return GpuUuidEntry(text.rstrip(_WHITESPACE))
    return _strtoul(raw, text)


def _strtoul(raw: str, text: str) -> Entry:
    sign = ""
    if text[:1] in ("+", "-"):
        sign, text = text[0], text[1:]
    digits = ""
    for char in text:
        if not char.isascii() or not char.isdigit():
            break
        digits += char
    rest = text[len(digits) :]
    if not digits:
        if not raw.strip(_WHITESPACE):
            return InvalidEntry("is empty")
        return InvalidEntry("is neither a number nor a GPU-/MIG- UUID")
    value = _ulong(digits)
    if sign == "-" and value != 0:
        return InvalidEntry(f"is negative ({sign}{digits}), which the driver reads as invalid")
    return IntegerEntry(value, rest if rest.strip(_WHITESPACE) else "")


def _ulong(digits: str) -> int:
    """ASCII digits as strtoul reads them: at most ``ULONG_MAX``."""
    significant = digits.lstrip("0")
    return ULONG_MAX if len(significant) > 20 else min(int(significant or "0"), ULONG_MAX)
