"""Typed reads of one JSON object of a scenario, with errors that name file and field.

Scenario files are written by hand; a message like ``gpus[1].power_limit_w: must be a
number, got the string '300 W'`` saves the writer a hunt. Every read here knows its JSON
location, so no caller has to build one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gputop.core.errors import ScenarioError
from gputop.core.fake.signals import Signal, describe_json, is_number


class ObjectReader:
    """One JSON object at location ``where`` of the file ``path``.

    Unknown keys are rejected so that a typo (``temprature_c``) is reported instead of
    silently meaning "not supported". Keys starting with ``_`` are free for comments.
    """

    def __init__(self, path: str, data: Any, where: str, known: Iterable[str]) -> None:
        self.path = path
        self.where = where
        if not isinstance(data, Mapping):
            problem = f"must be an object, got {describe_json(data)}"
            raise ScenarioError(path, problem, where or None)
        self.data: Mapping[str, Any] = data
        known_keys = set(known)
        for key in data:
            if key not in known_keys and not str(key).startswith("_"):
                raise ScenarioError(
                    path,
                    f"unknown field {key!r} (known: {', '.join(sorted(known_keys))})",
                    self.field(key),
                )

    def field(self, key: str) -> str:
        """The JSON location of ``key`` inside this object."""
        return f"{self.where}.{key}" if self.where else key

    def error(self, key: str, problem: str) -> ScenarioError:
        return ScenarioError(self.path, problem, self.field(key))

    def _value(self, key: str, required: bool) -> Any:
        value = self.data.get(key)
        if value is None and required:
            raise self.error(key, "is required")
        return value

    def string(self, key: str, *, required: bool = False) -> str | None:
        value = self._value(key, required)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {describe_json(value)}")
        if required and not value.strip():
            raise self.error(key, "must not be empty")
        return value

    def number(self, key: str, *, required: bool = False, minimum: float = 0.0) -> float | None:
        value = self._value(key, required)
        if value is None:
            return None
        if not is_number(value):
            raise self.error(key, f"must be a number, got {describe_json(value)}")
        if value < minimum:
            raise self.error(key, f"must be at least {minimum:g}, got {value:g}")
        return float(value)

    def integer(
        self,
        key: str,
        *,
        required: bool = False,
        minimum: int = 0,
        maximum: int | None = None,
        allowed: Iterable[int] | None = None,
    ) -> int | None:
        value = self._value(key, required)
        if value is None:
            return None
        return self.check_integer(key, value, minimum=minimum, maximum=maximum, allowed=allowed)

    def check_integer(
        self,
        key: str,
        value: Any,
        *,
        minimum: int = 0,
        maximum: int | None = None,
        allowed: Iterable[int] | None = None,
    ) -> int:
        """Validate ``value`` as a whole number in range; ``key`` may carry an index suffix."""
        if not is_number(value) or value != int(value):
            raise self.error(key, f"must be a whole number, got {describe_json(value)}")
        number = int(value)
        if allowed is not None:
            choices = tuple(allowed)
            if number not in choices:
                raise self.error(
                    key, f"must be one of {', '.join(map(str, choices))}, got {number}"
                )
        if number < minimum or (maximum is not None and number > maximum):
            upper = f"..{maximum}" if maximum is not None else " or more"
            raise self.error(key, f"must be {minimum}{upper}, got {number}")
        return number

    def flag(self, key: str) -> bool | None:
        """A boolean; ``0`` and ``1`` are accepted too, as NVML reports these as ints."""
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or value in (0, 1):
            return bool(value)
        raise self.error(key, f"must be true, false, 0 or 1, got {describe_json(value)}")

    def signal(self, key: str) -> Signal | None:
        value = self.data.get(key)
        if value is None:
            return None
        return Signal.from_json(value, path=self.path, field=self.field(key))

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(key, f"must be a list of strings, got {describe_json(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ScenarioError(
                    self.path,
                    f"must be a string, got {describe_json(item)}",
                    f"{self.field(key)}[{i}]",
                )
        return tuple(value)

    def items(self, key: str) -> Iterator[tuple[str, Any]]:
        """``(location, item)`` for each element of the list at ``key`` (absent: none)."""
        value = self.data.get(key)
        if value is None:
            return
        if not isinstance(value, list):
            raise self.error(key, f"must be a list, got {describe_json(value)}")
        for i, item in enumerate(value):
            yield f"{self.field(key)}[{i}]", item

    def child(self, key: str, known: Iterable[str]) -> ObjectReader | None:
        value = self.data.get(key)
        if value is None:
            return None
        return ObjectReader(self.path, value, self.field(key), known)
