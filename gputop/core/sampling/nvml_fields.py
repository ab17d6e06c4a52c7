"""One helper for every NVML call, so one failing field never breaks the rest.

NVML answers "not available" in several ways: the board has no such sensor
(NOT_SUPPORTED), the user may not ask (NO_PERMISSION), the driver predates the function
(FUNCTION_NOT_FOUND), or the data are not there yet (NOT_FOUND, NO_DATA). All of them mean
"N/A for this field". So does anything else a call raises: newer bindings raise
``NVMLLibraryMismatchError`` (not an ``NVMLError``) for a call the driver is too old for, and
an odd value can make ctypes or a conversion raise ``OverflowError`` or ``TypeError``.
GPU_IS_LOST is different: the whole card is gone, so the caller stops asking it anything and
marks it lost.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


class GpuLostError(Exception):
    """Internal signal: NVML said GPU_IS_LOST while reading a field of this card."""


class FieldReader:
    """Calls NVML functions by name and turns every failure into ``None``.

    Functions that the driver lacks are remembered, so an old driver costs one failed
    lookup per function for the whole run instead of one per refresh.
    """

    def __init__(self, nvml: ModuleType | Any) -> None:
        self._nvml = nvml
        self._nvml_error: type[Exception] = nvml.NVMLError
        self._lost_error: type[Exception] = nvml.NVMLError_GpuIsLost
        self._missing_error: type[Exception] = nvml.NVMLError_FunctionNotFound
        self._not_found_error: type[Exception] = nvml.NVMLError_NotFound
        # Absent from bindings before 12.550; a class nothing raises stands in for it there.
        self._mismatch_error: type[Exception] = getattr(
            nvml, "NVMLLibraryMismatchError", _NeverRaised
        )
        self._missing: set[str] = set()
        self._binding_lacks: dict[tuple[str, ...], bool] = {}

    def has(self, function: str) -> bool:
        """False once the driver has said it lacks ``function``."""
        return function not in self._missing

    def binding_lacks(self, *names: str) -> bool:
        """Whether the NVML module lacks one of ``names`` (a function or a struct of a newer
        binding), asked once."""
        known = self._binding_lacks.get(names)
        if known is None:
            known = self._binding_lacks[names] = not all(
                getattr(self._nvml, name, None) is not None for name in names
            )
        return known

    def error_for(self, code: int) -> Exception:
        """The binding's exception for an NVML return code (``NVMLError(code)`` picks the
        subclass), for a call gputop makes through a driver symbol."""
        return self._nvml_error(code)

    def call(
        self, function: str, call: Callable[..., T], *args: Any, not_found: Any = None
    ) -> T | Any | None:
        """``call(*args)`` answered as ``read`` answers ``nvml.<function>(*args)``: for a
        call gputop makes itself through the driver's symbol of ``function``."""
        if function in self._missing:
            return None
        return self._answer(function, call, args, not_found)

    def read(self, function: str, *args: Any, not_found: Any = None) -> Any | None:
        """``nvml.<function>(*args)``, or ``None`` when NVML cannot give it.

        ``not_found`` is the answer for NVML's NOT_FOUND, which for some calls is a reading
        (no process samples: all idle) rather than a gap. Raises GpuLostError when NVML
        reports the GPU as lost.
        """
        if function in self._missing:
            return None
        fn = getattr(self._nvml, function, None)
        if fn is None:
            self._missing.add(function)
            return None
        return self._answer(function, fn, args, not_found)

    def _answer(
        self, function: str, fn: Callable[..., Any], args: tuple[Any, ...], not_found: Any
    ) -> Any | None:
        try:
            return fn(*args)
        except self._lost_error as error:
            raise GpuLostError(function) from error
        except (self._missing_error, self._mismatch_error):
            self._missing.add(function)
            return None
        except self._not_found_error:
            return not_found
        except self._nvml_error:
            return None
        except Exception:  # one field must never take the sample down
            return None

    def read_first(self, functions: tuple[str, ...], *args: Any) -> Any | None:
        """The first of ``functions`` the driver has, newest first, for versioned calls.

        Only a missing function moves on to the next; any other failure is the answer.
        """
        for function in functions:
            if function in self._missing:
                continue
            value = self.read(function, *args)
            if value is not None or function not in self._missing:
                return value
        return None


class _NeverRaised(Exception):
    """Stands in for an exception class the binding in use does not define."""


def convert(value: Any | None, transform: Callable[[Any], T]) -> T | None:
    """Apply ``transform`` to a reading unless it is missing; a value it cannot take (an odd
    type, NaN into ``int``) reads as missing too, as the field's failure and nothing more."""
    if value is None:
        return None
    try:
        return transform(value)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None


def attribute_int(value: Any | None, name: str, default: int | None = None) -> int | None:
    """``int(value.<name>)`` for a struct reading; ``default`` when the reading is missing,
    ``None`` when the struct lacks the field or holds something that is not a number."""
    if value is None:
        return default
    return convert(getattr(value, name, None), int)


def text(value: Any | None) -> str | None:
    """NVML strings arrive as ``str`` or ``bytes`` depending on the binding's version."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
