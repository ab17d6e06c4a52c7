"""Readings that move over time: a constant, or sines plus deterministic jitter.

A scenario describes each reading as a *signal* so that the simulated dashboard looks alive
without being random: the same scenario at the same scenario time always gives the same
value. That is what makes frozen-clock tests and generated screenshots reproducible.

Jitter is a pseudo-random step, constant for ``jitter_period`` seconds, taken from a hash of
the signal's seed and the step number. The seed comes from the signal's JSON location, so two
GPUs with identical signals still jitter differently, and no global ``random`` state is used.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Mapping
from typing import Any

from gputop.core.errors import ScenarioError
from gputop.core.records import frozen

SIGNAL_KEYS = ("base", "amp", "period", "phase", "waves", "jitter", "jitter_period", "min", "max")


@frozen
class Wave:
    """One extra sine term: ``amp * sin(2π (t / period_s + phase))``."""

    amp: float
    period_s: float
    phase: float = 0.0


@frozen
class Signal:
    """A reading as a function of scenario time (seconds)."""

    base: float
    amp: float = 0.0
    period_s: float = 1.0
    phase: float = 0.0
    waves: tuple[Wave, ...] = ()
    jitter: float = 0.0
    jitter_period_s: float = 1.0
    minimum: float | None = None
    maximum: float | None = None
    seed: int = 0

    @classmethod
    def constant(cls, value: float) -> Signal:
        return cls(base=float(value))

    @classmethod
    def from_json(cls, value: Any, *, path: str, field: str) -> Signal:
        """Parse a number or the object form; ``field`` names it in errors and seeds jitter."""
        if is_number(value):
            return cls.constant(value)
        if not isinstance(value, Mapping):
            raise ScenarioError(
                path,
                f"a signal must be a number or an object with {', '.join(SIGNAL_KEYS)}; "
                f"got {describe_json(value)}",
                field,
            )
        unknown = sorted(set(value) - set(SIGNAL_KEYS))
        if unknown:
            raise ScenarioError(
                path,
                f"unknown signal key {unknown[0]!r} (known: {', '.join(SIGNAL_KEYS)})",
                f"{field}.{unknown[0]}",
            )
        number = _NumberReader(value, path, field)
        amp = number.get("amp", 0.0)
        if amp != 0.0 and "period" not in value:
            raise ScenarioError(path, "a signal with an amp needs a period", f"{field}.period")
        minimum = number.get("min", None)
        maximum = number.get("max", None)
        if minimum is not None and maximum is not None and minimum > maximum:
            raise ScenarioError(
                path, f"min ({minimum:g}) is greater than max ({maximum:g})", f"{field}.min"
            )
        return cls(
            base=number.get("base", 0.0),
            amp=amp,
            period_s=number.positive("period", 1.0),
            phase=number.get("phase", 0.0),
            waves=_parse_waves(value.get("waves", []), path, f"{field}.waves"),
            jitter=number.get("jitter", 0.0),
            jitter_period_s=number.positive("jitter_period", 1.0),
            minimum=minimum,
            maximum=maximum,
            seed=_seed(field),
        )

    def value_at(self, t: float) -> float:
        """The reading at scenario time ``t`` (seconds), clamped to ``[min, max]``."""
        value = self.base
        if self.amp:
            value += self.amp * _sin(_TAU * (t / self.period_s + self.phase))
        for wave in self.waves:
            value += wave.amp * _sin(_TAU * (t / wave.period_s + wave.phase))
        if self.jitter:  # a value in [-1, 1] that depends only on (seed, step)
            noise = _new_hash()
            noise.update(_pack_seed_step(self.seed, _floor(t / self.jitter_period_s)))
            value += self.jitter * (_from_bytes(noise.digest(), "little") / _HALF_RANGE - 1.0)
        # as max(minimum, value) and min(maximum, value) choose, ties and NaN included
        if self.minimum is not None and not value > self.minimum:
            value = self.minimum
        if self.maximum is not None and not value < self.maximum:
            value = self.maximum
        return value

    def upper_bound(self) -> float:
        """The most ``value_at`` can ever give: every sine at its crest and the jitter at
        its top (a bound, met or not), clamped as the readings are."""
        value = self.base + abs(self.amp) + sum(abs(wave.amp) for wave in self.waves)
        value += abs(self.jitter)
        if self.maximum is not None:
            value = min(self.maximum, value)
        if self.minimum is not None:
            value = max(self.minimum, value)
        return value


class _NumberReader:
    """Reads numeric keys of one signal object, naming the exact key in errors."""

    def __init__(self, data: Mapping[str, Any], path: str, field: str) -> None:
        self._data = data
        self._path = path
        self._field = field

    def get(self, key: str, default: float | None) -> Any:
        value = self._data.get(key)
        if value is None:
            return default
        if not is_number(value):
            raise ScenarioError(
                self._path, f"must be a number, got {describe_json(value)}", f"{self._field}.{key}"
            )
        return float(value)

    def positive(self, key: str, default: float) -> float:
        value = self.get(key, default)
        if value <= 0:
            raise ScenarioError(
                self._path, f"must be greater than 0, got {value:g}", f"{self._field}.{key}"
            )
        return float(value)


def _parse_waves(value: Any, path: str, field: str) -> tuple[Wave, ...]:
    if not isinstance(value, list):
        raise ScenarioError(
            path, f"must be a list of [amp, period_s, phase], got {describe_json(value)}", field
        )
    waves = []
    for i, item in enumerate(value):
        where = f"{field}[{i}]"
        if (
            not isinstance(item, list)
            or len(item) not in (2, 3)
            or not all(is_number(x) for x in item)
        ):
            raise ScenarioError(
                path, f"must be [amp, period_s] or [amp, period_s, phase], got {item!r}", where
            )
        if item[1] <= 0:
            raise ScenarioError(path, f"period must be greater than 0, got {item[1]:g}", where)
        waves.append(Wave(*(float(x) for x in item)))
    return tuple(waves)


def is_number(value: Any) -> bool:
    # bool is an int subclass, but `true` is never meant as a reading.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def describe_json(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return repr(value)


def _seed(field: str) -> int:
    # hashlib, not hash(): str hashes are salted per interpreter run.
    return int.from_bytes(hashlib.blake2b(field.encode(), digest_size=8).digest(), "little")


_TAU = 2 * math.pi  # as 2 * math.pi * x computes it: (2 * math.pi) * x
_sin = math.sin
_floor = math.floor
_pack_seed_step = struct.Struct("<Qq").pack
_from_bytes = int.from_bytes
_new_hash = hashlib.blake2b(digest_size=8).copy
"""A fresh 8-byte blake2b, copied from one never fed: the same digest as
``blake2b(data, digest_size=8)``, without parsing its arguments on every reading."""
_HALF_RANGE = float(2**63)
