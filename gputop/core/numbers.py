"""Numbers from outside gputop: finite, in range, written in ASCII digits, or refused by name.

Python's ``float()`` accepts ``nan``, ``inf`` and ``1e999`` and its ``int()`` accepts any
Unicode digit (``int("٣") == 3``): a NaN interval spins a core, an infinite one freezes, and
``--gpus ٣`` would launch on GPU 3. Every interval, timeout, poll and index a person or an
environment variable gives goes through one of these functions, and every JSON document
gputop prints goes through ``strict_json`` (see docs/security.md, part two).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, TypeGuard

from gputop.core.errors import UsageError

MAX_ID_DIGITS = 18
"""Indices and pids longer than this cannot name anything (SQLite integers are 64-bit)."""
MAX_ID = 2**63 - 1
"""The largest job id: SQLite's largest integer. Ids are checked by value (``parse_id``),
so ``0000000000000000000001`` is job 1 and ``9223372036854775808`` is no job."""
_MAX_ID_TEXT = len(str(MAX_ID))
PID_MAX_LIMIT = 2**22
"""Linux's ``PID_MAX_LIMIT``: every live process's pid is below it."""
MAX_MEMORY_BYTES = 2**50
"""1 PiB: more than any card or host holds; a larger memory reading is a broken one."""
MAX_PID = 2**31 - 1
"""The largest pid a ``pid_t`` holds: the bound on pids in data (NVML's, an agent's, the
history's). Not ``PID_MAX_LIMIT``: simulated GPUs number their processes past it, so that
none is a live process of the machine."""


def is_ascii_digits(text: str) -> bool:
    """``0``-``9`` only: ``"²"``, ``"٣"`` and ``"３"`` are digits to Python, not to gputop."""
    return bool(text) and text.isascii() and text.isdigit()


def parse_id(text: str) -> int | None:
    """A job id written in ASCII digits (leading zeros allowed), 0 to ``MAX_ID``; else None.

    The one rule for job ids, wherever they come from (the command line, ``settings.JOB_ID``
    and ``SLURM_JOB_ID`` in a process's environment): never ``int()`` on a text of any length.
    """
    if not is_ascii_digits(text):
        return None
    significant = text.lstrip("0") or "0"
    if len(significant) > _MAX_ID_TEXT:
        return None
    value = int(significant)
    return value if value <= MAX_ID else None


def parse_seconds(text: str, what: str, minimum: float, maximum: float) -> float:
    """A finite number of seconds in ``[minimum, maximum]``; ``what`` names it in errors."""
    try:
        if not text.isascii() or "_" in text:  # float("٣") is 3.0, float("1_0") 10.0
            raise ValueError(text)
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError(
            f"{what} {quoted(text)} is not a number of seconds: give one from "
            f"{_bound(minimum)} to {_bound(maximum)}."
        ) from None
    if not math.isfinite(value) or not minimum <= value <= maximum:
        raise UsageError(
            f"{what} {quoted(text)}: give a number of seconds from {_bound(minimum)} to "
            f"{_bound(maximum)}."
        )
    return value


def _bound(seconds: float) -> str:
    """A bound as a person types it: ``0.2``, ``3600``, ``31622400`` (never ``3.16224e+07``)."""
    return f"{seconds:.0f}" if seconds == int(seconds) else f"{seconds:g}"


def parse_size(text: str, what: str) -> int:
    """``1G``, ``512M``, ``64k`` or a byte count; ValueError naming ``what`` otherwise."""
    units = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    suffix = value[-1:] if value[-1:] in units else ""
    digits = value[: len(value) - len(suffix)].strip()
    if not is_ascii_digits(digits) or len(digits) > MAX_ID_DIGITS:
        raise ValueError(
            f"{what} {quoted(text)} is not a size: give bytes, or a number with k, M, G"
        )
    return int(digits) * units[suffix]


MAX_COUNT = 10**MAX_ID_DIGITS - 1
"""The largest whole number ``parse_count`` takes where no smaller maximum is given."""


def parse_count(text: str, what: str, minimum: int, maximum: int | None = None) -> int:
    """A whole number in ASCII digits in ``[minimum, maximum]`` (``maximum``: at most
    ``MAX_COUNT``). A whole number with more digits than that is too large (or too small),
    said as such: never ``int()`` on a text of any length."""
    stripped = text.strip()
    digits = stripped.removeprefix("-")
    if not is_ascii_digits(digits):
        raise UsageError(f"{what} {quoted(text)} is not a whole number (digits 0-9).")
    if maximum is not None:
        bounds = f"from {minimum} to {maximum}"
    else:
        bounds = f"{minimum} or more, at most {MAX_COUNT}"
    if len(digits.lstrip("0")) > MAX_ID_DIGITS:
        size = "too small" if stripped.startswith("-") else "too large"
        raise UsageError(f"{what} {quoted(stripped)} is {size}: give {bounds}.")
    value = int(stripped)
    if value < minimum or (maximum is not None and value > maximum):
        if maximum is None:
            bounds = f"{minimum} or more"
        raise UsageError(f"{what} {value} is out of range: give {bounds}.")
    return value


def digits_within(text: str | None, minimum: int, maximum: int) -> int | None:
    """A whole number another program wrote in ASCII digits (spaces around it allowed) in
    ``[minimum, maximum]``; None where it is not one: "not available", never an error."""
    stripped = (text or "").strip()
    if not is_ascii_digits(stripped) or len(stripped) > MAX_ID_DIGITS:
        return None
    value = int(stripped)
    return value if minimum <= value <= maximum else None


def quoted(text: str) -> str:
    """A value from outside as a message quotes it: whole up to 40 characters, else its
    start (an environment variable holds 128 KiB: never a message of that)."""
    if len(text) <= 40:
        return repr(text)
    return f"{text[:24]!r}... ({len(text)} characters)"


def finite_or_none(value: Any) -> Any:
    """``value`` with every NaN or infinite float (at any depth) replaced by ``None``, and
    every string (values and keys) made valid Unicode (``valid_text``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {
            valid_text(key) if isinstance(key, str) else key: finite_or_none(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [finite_or_none(item) for item in value]
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` without lone surrogates, which no UTF-8 can hold: a byte that was not UTF-8,
    kept by Python's ``surrogateescape`` (a command line, a path), becomes ``\\xNN`` as the
    sanitiser shows it; any other lone surrogate becomes U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(_replace_surrogate, text)
    return text


def _replace_surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"


def strict_json(value: Any, **options: Any) -> str:
    """JSON any parser accepts: no ``NaN``/``Infinity`` (an unknown number is ``null``), and
    valid UTF-8 once encoded (no lone surrogate, even escaped)."""
    return json.dumps(finite_or_none(value), allow_nan=False, **options)


LATEST_TIME_S = 253402300799.0
"""The last second of year 9999: a later time cannot be formatted (``time.localtime``)."""


def within(value: object, minimum: float, maximum: float) -> bool:
    """``value`` is a real number (not a bool), finite, in ``[minimum, maximum]``.

    For numbers read from another program or machine (an agent line, nvidia-smi's CSV,
    Slurm's JSON): what fails this becomes "not available" where it enters, so no renderer
    meets a NaN, a negative memory or a time no clock can show (docs/security.md).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return minimum <= value <= maximum


def whole_within(value: object, minimum: int, maximum: int) -> TypeGuard[int]:
    """``value`` is a whole number (an int, not a bool) in ``[minimum, maximum]``: a count,
    an index or a pid in a document another program wrote."""
    return isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= maximum


DECODE_ERRORS = (ValueError, TypeError, OverflowError, RecursionError)
"""What decoding a document from outside can raise beyond the decoder's own ``ValueError``
(``UnicodeDecodeError`` is one): nesting deeper than Python recurses, a whole number of
hundreds of digits that no float holds, a value of another type where a number belongs."""


def outside_json(text: str | bytes) -> Any:
    """JSON another program or machine wrote, or ``ValueError`` saying why it is not: a
    document nested deeper than the decoder recurses (``[`` 1,024 times) is "nested too
    deeply", never a RecursionError for the caller (docs/security.md)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except TypeError as error:  # bytes of no JSON encoding
        raise ValueError(str(error)) from None


def outside_float(value: object) -> float | None:
    """A number from outside as a float: ``None`` where it is not a number (a bool, a
    string), ``inf`` (or ``-inf``) where it is a whole number beyond every float (10**400,
    which ``float()`` refuses with OverflowError), so range checks refuse it by value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
