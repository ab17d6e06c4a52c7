"""What a job used, per card and in total: its supervisor measures it (usage_meter.py).

Recorded in the job's row as JSON and read back range-checked, as everything read from the
store's files: a value out of range makes the whole record "not measured" (``None``),
never a number no renderer expects (docs/history.md, "What each job used").
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any, TypeGuard

from gputop.core.numbers import MAX_MEMORY_BYTES as MAX_BYTES
from gputop.core.numbers import strict_json, whole_within, within
from gputop.core.records import frozen
from gputop.core.safe_text import clean
from gputop.core.units import duration, human_bytes

MAX_SECONDS = 10 * 365 * 86400.0
MAX_ENERGY_J = 1e15
MAX_CARDS = 64
PEAK_FROM_SAMPLES = "samples"
PEAK_FROM_ACCOUNTING = "accounting"
"""The driver's accounting stats: the exact per-process peak (accounting mode on)."""


@frozen
class CardUsage:
    """One card's share of a job."""

    physical_index: int
    uuid: str
    peak_memory_bytes: int | None
    """The most memory the job's processes held on it at once (``None``: never known)."""
    mean_sm_percent: float | None
    """The job's SM use, averaged over the time it was on the card."""
    gpu_seconds: float
    """Seconds the job had a process on the card."""
    energy_j: float | None
    """The card's energy counter over the job's run: the whole card's, whoever used it."""
    peak_from: str = PEAK_FROM_SAMPLES
    mean_sm_active_percent: float | None = None
    """The card's GPM SM active over the job's run (docs/activity.md): the whole card's,
    whoever used it; ``None`` where GPM never answered (before Hopper)."""
    mean_tensor_active_percent: float | None = None
    mean_dram_active_percent: float | None = None
    throttled_seconds: float | None = None
    """Seconds of the run in which a throttling clock event reason held (power cap, thermal,
    hardware slowdown); ``None`` where the driver never said."""

    def to_json(self) -> dict[str, Any]:
        """Every field by its name, the index as ``gpu``."""
        named = {field.name: getattr(self, field.name) for field in fields(self)[1:]}
        return {"gpu": self.physical_index, **named}


@frozen
class JobUsage:
    per_card: tuple[CardUsage, ...]
    peak_memory_bytes: int | None
    """The most memory the job held on all its cards at once."""
    samples: int
    """How many times its supervisor sampled the cards."""

    @property
    def gpu_seconds(self) -> float:
        return sum(card.gpu_seconds for card in self.per_card)

    @property
    def energy_j(self) -> float | None:
        known = [card.energy_j for card in self.per_card if card.energy_j is not None]
        return sum(known) if known else None

    @property
    def mean_sm_active_percent(self) -> float | None:
        """The mean of its cards' GPM SM active over the run, where GPM answered."""
        known = [c.mean_sm_active_percent for c in self.per_card]
        values = [value for value in known if value is not None]
        return sum(values) / len(values) if values else None

    @property
    def throttled_seconds(self) -> float | None:
        """The longest any of its cards was throttled during the run."""
        known = [c.throttled_seconds for c in self.per_card if c.throttled_seconds is not None]
        return max(known) if known else None

    def to_json(self) -> dict[str, Any]:
        """The ``usage`` object of ``gputop jobs --json``. Fields are only ever added."""
        return {
            "per_card": [card.to_json() for card in self.per_card],
            "gpu_seconds": self.gpu_seconds,
            "peak_memory_bytes": self.peak_memory_bytes,
            "energy_j": self.energy_j,
            "samples": self.samples,
        }

    def to_text(self) -> str:
        """The stored form: strict JSON."""
        return strict_json(self.to_json())


def activity_cell(usage: JobUsage | None) -> str:
    """``72 %`` (its cards' SM active over the run), ``⚠`` after it where a card was
    throttled, a dash where GPM never answered (docs/activity.md)."""
    if usage is None:
        return "-"
    sm = usage.mean_sm_active_percent
    text = "-" if sm is None else f"{sm:.0f} %"
    return f"{text} ⚠" if usage.throttled_seconds else text


NOT_MEASURED = "not_measured"
"""The key of a record that says why a job's use was not measured (a Slurm job whose node
could not run gputop's wrapper): kept in the same column, read back as ``usage`` None."""
MAX_NOTE_CHARS = 300


def not_measured_text(reason: str) -> str:
    """The stored form of "not measured, because ``reason``"."""
    return strict_json({NOT_MEASURED: reason[:MAX_NOTE_CHARS]})


def usage_note_from_text(text: str | None) -> str | None:
    """Why the job's use was not measured, where that was recorded (cleaned), else None."""
    data = _json(text) if text and NOT_MEASURED in text else None
    reason = data.get(NOT_MEASURED) if isinstance(data, dict) else None
    return clean(reason[:MAX_NOTE_CHARS]) if isinstance(reason, str) and reason else None


def usage_from_text(text: str | None) -> JobUsage | None:
    """The stored form back, every number range-checked; ``None`` when absent or not sane."""
    return usage_from_json(_json(text)) if text else None


def _json(text: str) -> object:
    """``text`` decoded; ``None`` where it is no JSON (or too deeply nested)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def usage_from_json(data: object) -> JobUsage | None:
    if not isinstance(data, dict):
        return None
    cards_data, samples = data.get("per_card"), data.get("samples")
    peak = data.get("peak_memory_bytes")
    if not isinstance(cards_data, list) or len(cards_data) > MAX_CARDS:
        return None
    if not whole_within(samples, 0, 2**40) or not _optional_int(peak, MAX_BYTES):
        return None
    cards = [_card(item) for item in cards_data]
    if any(card is None for card in cards):
        return None
    return JobUsage(tuple(c for c in cards if c is not None), peak, samples)


_OPTIONAL_NUMBERS = {
    "mean_sm_percent": 100,
    "energy_j": MAX_ENERGY_J,
    "mean_sm_active_percent": 100,
    "mean_tensor_active_percent": 100,
    "mean_dram_active_percent": 100,
    "throttled_seconds": MAX_SECONDS,
}
"""A card's figures that may be unknown (``None``; absent from older records), each's most."""


def _card(item: object) -> CardUsage | None:
    if not isinstance(item, dict):
        return None
    index, uuid, peak = item.get("gpu"), item.get("uuid"), item.get("peak_memory_bytes")
    seconds, peak_from = item.get("gpu_seconds"), item.get("peak_from")
    if not whole_within(index, 0, 4096) or not isinstance(uuid, str) or len(uuid) > 200:
        return None
    if not _optional_int(peak, MAX_BYTES) or not within(seconds, 0, MAX_SECONDS):
        return None
    if peak_from not in (PEAK_FROM_SAMPLES, PEAK_FROM_ACCOUNTING):
        return None
    known = {key: item.get(key) for key in _OPTIONAL_NUMBERS}
    if not all(v is None or within(v, 0, _OPTIONAL_NUMBERS[k]) for k, v in known.items()):
        return None
    return CardUsage(
        physical_index=index,
        uuid=uuid,
        peak_memory_bytes=peak,
        gpu_seconds=float(seconds),  # type: ignore[arg-type]  # checked: a number
        peak_from=peak_from,
        **{key: None if value is None else float(value) for key, value in known.items()},
    )


def _optional_int(value: object, high: int) -> TypeGuard[int | None]:
    return value is None or whole_within(value, 0, high)


def usage_summary(usage: JobUsage | None, note: str | None = None) -> str:
    """One line for a person (the job's log view): per card, then in total; where nothing
    was measured, why (``note``: a job's cleaned ``usage_note``) if known."""
    if usage is None:
        return f"GPU use: {note}" if note else "GPU use: not measured"
    parts = []
    for card in usage.per_card:
        words = [f"GPU {card.physical_index}: {duration(card.gpu_seconds)} GPU time"]
        if card.peak_memory_bytes is not None:
            exact = " (driver accounting)" if card.peak_from == PEAK_FROM_ACCOUNTING else ""
            words.append(f"peak {human_bytes(card.peak_memory_bytes)}{exact}")
        if card.mean_sm_percent is not None:
            words.append(f"SM {card.mean_sm_percent:.0f} %")
        if card.energy_j is not None:
            words.append(f"{energy_text(card.energy_j)}")
        words += activity_words(card)
        parts.append(", ".join(words))
    total = f"in all {duration(usage.gpu_seconds)} GPU time"
    if usage.peak_memory_bytes is not None:
        total += f", peak {human_bytes(usage.peak_memory_bytes)}"
    return "GPU use: " + "; ".join([*parts, total])


def activity_words(card: CardUsage) -> list[str]:
    """``SM active 72 %``, ``tensor 41 %``, ``DRAM 55 %``, ``throttled 3:20``: the card's
    GPM figures over the run and its throttled time, where known (docs/activity.md)."""
    words = [
        f"{name} {value:.0f} %"
        for name, value in (
            ("SM active", card.mean_sm_active_percent),
            ("tensor", card.mean_tensor_active_percent),
            ("DRAM", card.mean_dram_active_percent),
        )
        if value is not None
    ]
    if card.throttled_seconds:
        words.append(f"throttled {duration(card.throttled_seconds)}")
    return words


def energy_text(joules: float) -> str:
    """``310 J``, ``12.4 kJ``, ``3.1 MJ``."""
    if joules >= 1e6:
        return f"{joules / 1e6:.1f} MJ"
    if joules >= 1e3:
        return f"{joules / 1e3:.1f} kJ"
    return f"{joules:.0f} J"
