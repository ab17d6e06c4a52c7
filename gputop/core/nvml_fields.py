"""One helper for every NVML call, so one failing field never breaks the rest.

NVML answers "not available" in several ways: the board has no such sensor
(NOT_SUPPORTED), the user may not ask (NO_PERMISSION), the driver predates the function
(FUNCTION_NOT_FOUND), or the data are not there yet (NOT_FOUND, NO_DATA). All of them mean
"N/A for this field". GPU_IS_LOST is different: the whole card is gone, so the caller stops
asking it anything and marks it lost.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


class GpuLostError(Exception):
    """Internal signal: NVML said GPU_IS_LOST while reading a field of this card."""


class FieldReader:
    """Calls NVML functions by name and turns every NVML failure into ``None``.

    Functions that the driver lacks are remembered, so an old driver costs one failed
    lookup per function for the whole run instead of one per refresh.
    """

    def __init__(self, nvml: ModuleType | Any) -> None:
        self._nvml = nvml
        self._nvml_error: type[Exception] = nvml.NVMLError
        self._lost_error: type[Exception] = nvml.NVMLError_GpuIsLost
        self._missing_error: type[Exception] = nvml.NVMLError_FunctionNotFound
        self._missing: set[str] = set()

    def has(self, function: str) -> bool:
        """False once the driver has said it lacks ``function``."""
        return function not in self._missing

    def read(self, function: str, *args: Any) -> Any | None:
        """``nvml.<function>(*args)``, or ``None`` when NVML cannot give it.

        Raises GpuLostError when NVML reports the GPU as lost.
        """
        if function in self._missing:
            return None
        fn = getattr(self._nvml, function, None)
        if fn is None:
            self._missing.add(function)
            return None
        try:
            return fn(*args)
        except self._lost_error as error:
            raise GpuLostError(function) from error
        except self._missing_error:
            self._missing.add(function)
            return None
        except self._nvml_error:
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


def convert(value: Any | None, transform: Callable[[Any], T]) -> T | None:
    """Apply ``transform`` to a reading unless it is missing."""
    return None if value is None else transform(value)


def text(value: Any | None) -> str | None:
    """NVML strings arrive as ``str`` or ``bytes`` depending on the binding's version."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
