"""NVML's running-process lists, called in C with gputop's own structs.

The bindings cannot be trusted with these calls: each driver generation writes its own
entry layout (16, 24, or on 535.43 to 535.86 32 bytes from ``_v3``: docs/scenario.md,
"Driver generations"), while nvidia-ml-py hard-codes one layout per release and 12.550+
raises ``NVMLLibraryMismatchError`` where the driver lacks ``_v3``. So, as nvitop does,
gputop asks the driver which symbols it exports (``_nvmlGetFunctionPointer``), picks the
newest call and the layout that driver writes, and makes the two-step INSUFFICIENT_SIZE call
itself. The simulated NVML answers in the same C convention, so tests run this exact code.
"""

from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Callable
from typing import Any

from gputop.core.nvml_layouts import (
    NOT_ON_MIG,
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_SUCCESS,
    ProcessInfoV1,
    ProcessInfoV2,
    ProcessInfoV3Wide,
)
from gputop.core.records import frozen

MEMORY_NOT_AVAILABLE = 2**64 - 1
"""NVML_VALUE_NOT_AVAILABLE for ``usedGpuMemory`` (WDDM, some containers)."""
ATTEMPTS = 4
"""Size-then-fill rounds before giving up on a list that keeps growing."""
ENTRIES_MAX = 1 << 16
"""The most entries a driver may ask room for in one list: far more contexts than a card
holds (each takes memory of its own), and a 2 MB array. A count past it is a broken answer,
refused as the list's failure, never an allocation of gigabytes."""

COMPUTE = "nvmlDeviceGetComputeRunningProcesses"
GRAPHICS = "nvmlDeviceGetGraphicsRunningProcesses"
MPS = "nvmlDeviceGetMPSComputeRunningProcesses"
SUFFIXES = ("_v3", "_v2", "")
WIDE_V3_DRIVERS = ((535, 43), (535, 86))
"""First and last driver (major, minor) whose ``_v3`` calls write 32-byte entries."""


RawProcess = tuple[int, int | None, int | None, int | None]
"""One entry as the driver wrote it, the pid not yet checked: (pid, used memory in bytes,
GPU instance id, compute instance id), ``None`` where the driver gives none. A plain tuple:
a busy server has hundreds of entries a refresh."""


@frozen
class ListCall:
    """The symbol to call for one list and the entry layout that driver writes."""

    symbol: str
    entry: type[ctypes.Structure]


class DriverSymbols:
    """Which C functions the loaded driver exports, asked once per name.

    ``nvml._nvmlGetFunctionPointer`` is private to nvidia-ml-py but present and unchanged in
    every release since 11.x; nvitop relies on it the same way. Without it nothing is
    exported, and the process lists read as "not listed" rather than wrong.
    """

    def __init__(self, nvml: Any) -> None:
        self._lookup: Callable[[str], Any] | None = getattr(nvml, "_nvmlGetFunctionPointer", None)
        self._found: dict[str, Any | None] = {}
        self.room: dict[tuple[str, int], int] = {}
        """The entries a size-then-fill call of a symbol for a device (its handle's id) last
        made room for: the next call offers that much at once, and one call fills it while
        the list fits (NVML fills a large enough array and says how many it wrote, and asks
        for more only where the list grew past it). A hint only, for any thread: a wrong one
        costs a call or some room (``offered``, ``made_room``)."""

    def get(self, symbol: str) -> Any | None:
        """The callable C function, or ``None`` when the driver lacks it."""
        if symbol not in self._found:
            function = None
            if self._lookup is not None:
                try:
                    function = self._lookup(symbol)
                except Exception:  # FUNCTION_NOT_FOUND, or a broken binding
                    function = None
            self._found[symbol] = function
        return self._found[symbol]

    def exports(self, symbol: str) -> bool:
        return self.get(symbol) is not None


ROOM_KEPT = 256
"""Devices' and symbols' room kept at most (then it starts over: only a hint)."""


def made_room(room: dict[tuple[str, int], int], key: tuple[str, int], capacity: int) -> None:
    """A call for ``key`` made room for ``capacity`` entries: the next offers it."""
    if len(room) >= ROOM_KEPT and key not in room:
        room.clear()
    room[key] = capacity


def offered(room: dict[tuple[str, int], int], key: tuple[str, int], had: int, filled: int) -> None:
    """A call for ``key`` that had ``had`` entries of room filled ``filled``: room far past
    what the list needs (it shrank: a server whose 4,000 processes ended) is made smaller,
    so that every call does not allocate (and clear) it."""
    if had > 4 * filled + 64:
        made_room(room, key, filled * 2 + 5)


def driver_release(driver_version: str | None) -> tuple[int, int] | None:
    """``"535.54.03"`` -> ``(535, 54)``; ``None`` when the text is not a driver version."""
    match = re.match(r"\s*(\d+)\.(\d+)", driver_version or "")
    return (int(match[1]), int(match[2])) if match else None


def choose_call(symbols: DriverSymbols, base: str, driver_version: str | None) -> ListCall | None:
    """The newest version of list ``base`` the driver exports, with its entry layout."""
    for suffix in SUFFIXES:
        symbol = base + suffix
        if not symbols.exports(symbol):
            continue
        if suffix == "":
            return ListCall(symbol, ProcessInfoV1)
        release = driver_release(driver_version)
        wide = (
            suffix == "_v3"
            and release is not None
            and WIDE_V3_DRIVERS[0] <= release <= WIDE_V3_DRIVERS[1]
        )
        return ListCall(symbol, ProcessInfoV3Wide if wide else ProcessInfoV2)
    return None


def call_list(
    symbols: DriverSymbols, call: ListCall, handle: Any, error: Callable[[int], Exception]
) -> list[RawProcess]:
    """Run one list call: ask the size, allocate with room to grow, fill; retry if it grew.

    ``error`` turns an NVML return code into the binding's exception (``nvml.NVMLError``).
    """
    function = symbols.get(call.symbol)
    if function is None:
        raise error(13)  # NVML_ERROR_FUNCTION_NOT_FOUND
    key = (call.symbol, id(handle))
    room = symbols.room.get(key, 0)
    count = ctypes.c_uint(room)
    entries: Any = (call.entry * room)() if room else None
    for _attempt in range(ATTEMPTS + (1 if room else 0)):  # the offered room: one more
        result = int(function(handle, ctypes.pointer(count), entries))
        if result == NVML_SUCCESS:
            if entries is None:
                return []
            filled = min(count.value, len(entries))
            offered(symbols.room, key, room, filled)
            return _entries(entries, filled)
        if result != NVML_ERROR_INSUFFICIENT_SIZE:
            raise error(result)
        if count.value > ENTRIES_MAX:
            raise error(result)
        capacity = count.value * 2 + 5
        entries = (call.entry * capacity)()
        count.value = capacity
        made_room(symbols.room, key, capacity)
    raise error(NVML_ERROR_INSUFFICIENT_SIZE)


def _entries(entries: Any, count: int) -> list[RawProcess]:
    """The first ``count`` entries of a filled array, read from its bytes in one pass
    (``struct``, at the layout's own field offsets) rather than field by field."""
    layout = entries._type_
    data = ctypes.string_at(entries, count * ctypes.sizeof(layout))
    rows = _unpacker(layout)(data)
    none, absent = NOT_ON_MIG, MEMORY_NOT_AVAILABLE
    if not hasattr(layout, "gpuInstanceId"):  # v1: no MIG instance ids
        return [(pid, None if used == absent else used, None, None) for pid, used in rows]
    return [
        (
            pid,
            None if used == absent else used,
            None if gi == none else gi,
            None if ci == none else ci,
        )
        for pid, used, gi, ci in rows
    ]


_UNPACKERS: dict[type[ctypes.Structure], Callable[[bytes], Any]] = {}
_FIELD_CODES = {ctypes.c_uint: "I", ctypes.c_ulonglong: "Q"}
_READ = ("pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId")


def _unpacker(layout: type[ctypes.Structure]) -> Callable[[bytes], Any]:
    """``struct``'s reader of an array of ``layout``: the fields of ``_READ`` it has, each at
    its ctypes offset, the rest skipped as padding."""
    unpack = _UNPACKERS.get(layout)
    if unpack is None:
        fields = dict(_all_fields(layout))
        parts, at = ["="], 0
        for name in _READ:
            if name not in fields:
                break
            descriptor = getattr(layout, name)
            parts.append(f"{descriptor.offset - at}x" if descriptor.offset > at else "")
            parts.append(_FIELD_CODES[fields[name]])
            at = descriptor.offset + descriptor.size
        size = ctypes.sizeof(layout)
        parts.append(f"{size - at}x" if size > at else "")
        unpack = _UNPACKERS[layout] = struct.Struct("".join(parts)).iter_unpack
    return unpack


def _all_fields(layout: type) -> list[tuple[str, Any]]:
    """A structure's fields with those of the structures it extends, in memory order."""
    fields: list[tuple[str, Any]] = []
    for klass in reversed(layout.__mro__):
        fields += [(f[0], f[1]) for f in klass.__dict__.get("_fields_", ())]
    return fields
