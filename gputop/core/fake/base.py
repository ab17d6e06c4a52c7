"""What every simulated NVML call shares: handles, the clock, and the failure checks.

A real driver fails in layers, and gputop must survive each: a function the driver lacks
(FUNCTION_NOT_FOUND) fails before anything else, then a library not initialised
(UNINITIALIZED), then a bad handle (INVALID_ARGUMENT), a fallen-off card (GPU_IS_LOST), a
function the user may not call (NO_PERMISSION), and finally a reading the board does not
have (NOT_SUPPORTED). ``nvml_function`` applies these in that order to every call, so the
calls themselves only compute readings.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable
from typing import Any, Literal, NoReturn, TypeVar

import pynvml

from gputop.core.fake.scenario_types import Scenario, ScenarioGpu, ScenarioMigDevice
from gputop.core.fake.signals import Signal
from gputop.core.records import frozen

MIB = 1024 * 1024
F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
DRIVER_TICK_S = 0.05
"""How often the simulated driver updates its readings: every call within one such window
of scenario time (on a frozen clock, of real time as well) reads the same values, taken at
the window's start, as a real driver refreshes what it reports periodically, not per call
(docs/scenario.md, "When readings change")."""
SAMPLE_PERIOD_S = 1.0
"""The driver's utilisation sample: a card's GPU % and its processes' SM % are each the share
of one such second of scenario time, the same second for both (docs/scenario.md, "What adds
up")."""


@frozen
class FakeDeviceHandle:
    """An opaque device handle: a GPU, or one MIG device of it."""

    gpu: int
    """The GPU's physical (NVML) index."""
    mig: int | None = None
    """The MIG device's slot under that GPU, or ``None`` for the whole GPU."""

    def __repr__(self) -> str:
        mig = f" mig={self.mig}" if self.mig is not None else ""
        return f"<fake nvmlDevice gpu={self.gpu}{mig}>"


def nvml_error(code: int) -> NoReturn:
    """Raise as pynvml does: ``NVMLError.__new__`` picks the subclass for ``code``."""
    raise pynvml.NVMLError(code)


def nvml_function(
    device: Literal["none", "gpu", "any"] = "gpu", name: str | None = None
) -> Callable[[F], F]:
    """Mark a method as a simulated NVML function and run the driver's checks first.

    ``device`` says what the first argument is: ``"none"`` (a system call), ``"gpu"`` (a
    GPU handle; a MIG handle is NOT_SUPPORTED, as for most real per-device readings) or
    ``"any"`` (a GPU or MIG handle). ``name``: the symbol checked, if not the method's.
    """

    def decorate(method: F) -> F:
        symbol = name or method.__name__

        @functools.wraps(method)
        def call(self: FakeNvmlBase, *args: Any, **kwargs: Any) -> Any:
            self._check_call(symbol)
            if device != "none":
                handle = args[0] if args else kwargs.get("handle")
                self._check_device(symbol, handle, allow_mig=device == "any")
            return method(self, *args, **kwargs)

        call.__name__ = symbol
        call.nvml_device = device  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return decorate


class _Twin:
    def __init__(self, call: Any) -> None:
        self._call = call

    def __set_name__(self, owner: type, name: str) -> None:
        method = nvml_function(self._call.nvml_device, name)(self._call.__wrapped__)
        method.__qualname__ = f"{owner.__qualname__}.{name}"
        setattr(owner, name, method)


def nvml_twin(call: F) -> F:
    """Another symbol of ``call`` (``nvmlDeviceGetPciInfo_v3`` of ``nvmlDeviceGetPciInfo``):
    it answers the same, and the driver's checks name it, so a scenario may lack either."""
    return _Twin(call)  # type: ignore[return-value]


class FakeNvmlBase:
    """State and helpers for the call mixins; ``FakeNvml`` is the public class."""

    def __init__(
        self, scenario: Scenario, frozen_time: float | None = None, speed: float = 1.0
    ) -> None:
        self._scenario = scenario
        self._frozen_time = frozen_time
        self._speed = speed
        self._t0 = time.monotonic()
        self._epoch_at_zero = scenario.start_time if frozen_time is not None else time.time()
        self._processes_epoch = (
            scenario.start_time if frozen_time is not None else _this_machines_boot()
        )
        """What the scenario's process start times (``started_s_ago``) count back from: the
        scenario's t=0 on a frozen clock; on a running one this machine's boot, the same in
        every run until it reboots, so a simulated process keeps its pid and start time
        across runs (the history store knows a process by both) and its age stays that of
        a process of this machine's uptime, not of the scenario's date."""
        self._init_count = 0
        self._tick: tuple[float, int] | None = None
        """The driver update the memo below holds (``_tick_key``)."""
        self._tick_memo: dict[Any, Any] = {}

    @property
    def scenario(self) -> Scenario:
        """The scenario this module simulates."""
        return self._scenario

    def now(self) -> float:
        """Scenario time in seconds: frozen, or elapsed since this module was made (times
        ``speed``: ``settings.FAKE_SPEED``, so a test records hours in seconds)."""
        if self._frozen_time is not None:
            return self._frozen_time
        return (time.monotonic() - self._t0) * self._speed

    def reading_time(self) -> float:
        """The scenario time the readings of a call made now are taken at: the frozen time,
        or on a running clock the start of the current driver update (``DRIVER_TICK_S``)."""
        if self._frozen_time is not None:
            return self._frozen_time
        now = (time.monotonic() - self._t0) * self._speed
        return math.floor(now / DRIVER_TICK_S) * DRIVER_TICK_S

    def sample_time(self) -> float:
        """The start of the utilisation sample (``SAMPLE_PERIOD_S``) a call made now reads."""
        return math.floor(self.now() / SAMPLE_PERIOD_S) * SAMPLE_PERIOD_S

    def _tick_key(self) -> tuple[float, int]:
        """The driver update a call falls in: its reading time and, on a frozen clock, the
        real time's window too, for what moves with real time there as well (the jobs pinned
        to simulated cards, pinned.py)."""
        if self._frozen_time is None:
            return self.reading_time(), 0
        return self._frozen_time, math.floor(time.monotonic() / DRIVER_TICK_S)

    def _memo(self, key: Any, compute: Callable[[], T]) -> T:
        """``compute()``, once per driver update for ``key``: what the calls of one update
        share (a card's processes, their memory and time shares) is worked out once."""
        tick = self._tick_key()
        if tick != self._tick:
            self._tick = tick
            self._tick_memo = {}
        memo = self._tick_memo
        if key in memo:
            return memo[key]
        value = memo[key] = compute()
        return value

    @property
    def speed(self) -> float:
        """How many scenario seconds pass in a real second (1 but for ``settings.FAKE_SPEED``)."""
        return self._speed

    def set_time(self, t: float) -> None:
        """Freeze the clock at scenario time ``t``, so a test can step through a scenario.

        A clock that was running keeps its epoch origin, so timestamps stay monotonic.
        """
        self._frozen_time = float(t)

    def epoch_time(self) -> float:
        """Wall-clock seconds: ``start_time + t`` when frozen (reproducible), else real (from
        the real start, running ``speed`` times faster)."""
        if self._frozen_time is not None:
            return self._epoch_at_zero + self._frozen_time
        if self._speed != 1.0:
            return self._epoch_at_zero + self.now()
        return time.time()

    def _process_start_epoch(self, started_s_ago: float) -> float:
        """The epoch time a simulated process started, ``started_s_ago`` before the
        processes' origin (``_processes_epoch``): the same in every run."""
        return self._processes_epoch - started_s_ago

    def _driver_before(self, branch: int) -> bool:
        """Whether the scenario's ``driver_version`` is of a branch older than ``branch``
        (no version: not older, the newest generation)."""
        major = _driver_branch(self._scenario.driver_version)
        return major is not None and major < branch

    def _epoch_at(self, t: float) -> float:
        """The epoch time of scenario time ``t``, on the same scale as ``epoch_time``."""
        return self._epoch_at_zero + t

    # -- checks, in the driver's order ----------------------------------------------------

    def _check_call(self, name: str) -> None:
        scenario = self._scenario  # read once: FakeNvml has __getattr__, so reads of self are slow
        if name in scenario.missing_functions:
            nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if self._init_count == 0 and not name.startswith("nvmlInit"):
            nvml_error(pynvml.NVML_ERROR_UNINITIALIZED)
        code = scenario.function_errors.get(name)
        if code is not None:
            nvml_error(code)

    def _check_device(self, name: str, handle: Any, *, allow_mig: bool) -> None:
        gpus = self._scenario.gpus
        if not isinstance(handle, FakeDeviceHandle) or not 0 <= handle.gpu < len(gpus):
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = gpus[handle.gpu]
        if handle.mig is not None and not 0 <= handle.mig < len(gpu.mig_devices):
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if gpu.lost_after_s is not None and self.now() >= gpu.lost_after_s:
            nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)
        if name in gpu.no_permission:
            nvml_error(pynvml.NVML_ERROR_NO_PERMISSION)
        code = gpu.function_errors.get(name)
        if code is not None:
            nvml_error(code)
        if handle.mig is not None and not allow_mig:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)

    # -- readings ---------------------------------------------------------------------------

    def _gpu(self, handle: FakeDeviceHandle) -> ScenarioGpu:
        return self._scenario.gpus[handle.gpu]

    def _mig(self, handle: FakeDeviceHandle) -> ScenarioMigDevice | None:
        if handle.mig is None:
            return None
        return self._scenario.gpus[handle.gpu].mig_devices[handle.mig]

    def _value(self, signal: Signal | None, t: float | None = None) -> float:
        """The signal now (its driver update's, or at ``t``); absent is NOT_SUPPORTED."""
        if signal is None:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return signal.value_at(self.reading_time() if t is None else t)

    # The three below are every reading's path: written out, one call fewer each (as
    # max(0, ...) and min(100, ...) would give).

    def _uint(self, signal: Signal | None, t: float | None = None) -> int:
        """A reading as NVML's unsigned int: rounded, never negative."""
        if signal is None:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        value = round(signal.value_at(self.reading_time() if t is None else t))
        return value if value > 0 else 0

    def _percent(self, signal: Signal | None, t: float | None = None) -> int:
        """A reading as NVML's percent: ``_uint``'s, at most 100."""
        if signal is None:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        value = round(signal.value_at(self.reading_time() if t is None else t))
        return 0 if value <= 0 else value if value < 100 else 100

    def _bytes(self, signal_mib: Signal | None, t: float | None = None) -> int:
        if signal_mib is None:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        value = round(signal_mib.value_at(self.reading_time() if t is None else t) * MIB)
        return value if value > 0 else 0

    def _percent_or_zero(self, signal: Signal | None, t: float | None = None) -> int:
        """A secondary reading of a call whose main reading exists: absent reads 0."""
        return 0 if signal is None else self._percent(signal, t)

    def _bytes_or_zero(self, signal_mib: Signal | None, t: float | None = None) -> int:
        return 0 if signal_mib is None else self._bytes(signal_mib, t)

    @staticmethod
    def _static(value: Any) -> Any:
        """A fixed field; absent is NOT_SUPPORTED."""
        if value is None:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value


def _this_machines_boot() -> float:
    """The kernel's boot time (``btime`` of ``/proc/stat``, whole seconds, the same for every
    process until a reboot or a clock step); now where it cannot be read."""
    import psutil

    try:
        return float(psutil.boot_time())
    except (OSError, RuntimeError):
        return time.time()


@functools.lru_cache(maxsize=16)
def _driver_branch(driver_version: str | None) -> int | None:
    """The branch of a driver version (``535`` of ``535.104.05``), ``None`` without one:
    parsed once per version, not on every call that depends on it (a few hundred a
    busy sample)."""
    match = re.match(r"(\d+)\.", driver_version or "")
    return None if match is None else int(match[1])
