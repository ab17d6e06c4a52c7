"""``FakeNvml``: a stand-in for the ``pynvml`` module, driven by a scenario.

The backend takes "an NVML module" and never knows which one it has, so the dashboard,
the CUDA mapping and the tests run on machines without a GPU. To make that honest the fake
copies everything that is not an NVML library call from the real ``pynvml`` (constants,
structs and, above all, the exception classes, so ``except pynvml.NVMLError_NotSupported``
catches the fake's errors), and answers any NVML function it does not simulate with
FUNCTION_NOT_FOUND, as an old driver would, never with ``AttributeError``.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, NoReturn

import pynvml

from gputop.core.fake.base import FakeDeviceHandle, nvml_error, nvml_function, nvml_twin
from gputop.core.fake.c_calls import CCalls
from gputop.core.fake.device_calls import DeviceCalls
from gputop.core.fake.gpm_calls import GpmCalls
from gputop.core.fake.health_calls import HealthCalls
from gputop.core.fake.mig_calls import MigCalls
from gputop.core.fake.process_calls import SimulatedProcess
from gputop.core.fake.usage_calls import UsageCalls

__all__ = ["FakeDeviceHandle", "FakeNvml", "SimulatedProcess"]

_PYNVML_HELPERS = frozenset({"nvmlStructToFriendlyObject", "nvmlExceptionClass"})
"""pynvml functions named ``nvml*`` that are pure Python, not calls into the library."""


class FakeNvml(DeviceCalls, MigCalls, CCalls, UsageCalls, GpmCalls, HealthCalls):
    """A pynvml-shaped object simulating the GPUs of ``scenario``.

    ``frozen_time`` pins the scenario clock (seconds since the scenario started) so that
    every reading is reproducible; without it the clock runs from construction, ``speed``
    times faster than real time.
    """

    def __repr__(self) -> str:
        return f"<FakeNvml {self._scenario.path!r}, {len(self._scenario.gpus)} GPUs>"

    def __getattr__(self, name: str) -> Any:
        """pynvml's constants, structs and errors; FUNCTION_NOT_FOUND for other ``nvml*``."""
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(pynvml, name, _ABSENT)
        if value is not _ABSENT and not _is_library_call(name, value):
            if not name.startswith("_") and not isinstance(value, types.FunctionType):
                # a constant, struct or error class: kept, so the next read of it (a
                # sample reads about 180) finds it without coming here
                self.__dict__[name] = value
            return value
        if name.startswith("nvml"):
            return _function_not_found(name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def recent_utilization(self, seconds: int) -> dict[str, tuple[int | None, ...]]:
        """GPU utilisation for each of the ``seconds`` before now, oldest first, by UUID.

        Lets a dashboard on a frozen clock (tests, screenshots) start with the history it
        would have had after running that long. Lost or unsupported readings are ``None``.
        """
        now = self.now()
        history: dict[str, tuple[int | None, ...]] = {}
        for gpu in self._scenario.gpus:
            values: list[int | None] = []
            for step in range(seconds, 0, -1):
                t = now - step
                lost = gpu.lost_after_s is not None and t >= gpu.lost_after_s
                if t < 0 or lost or gpu.utilization_gpu is None:
                    values.append(None)
                else:
                    values.append(self._percent(gpu.utilization_gpu, t))
            history[gpu.uuid] = tuple(values)
        return history

    # -- library --------------------------------------------------------------------------

    @nvml_function("none")
    def nvmlInit(self) -> None:
        self._init_count += 1

    @nvml_function("none")
    def nvmlInitWithFlags(self, flags: int) -> None:
        self._init_count += 1

    @nvml_function("none")
    def nvmlShutdown(self) -> None:
        """Balances one init, as NVML counts them."""
        self._init_count -= 1

    # -- system -----------------------------------------------------------------------------

    @nvml_function("none")
    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self._static(self._scenario.driver_version))

    @nvml_function("none")
    def nvmlSystemGetNVMLVersion(self) -> str:
        return str(self._static(self._scenario.nvml_version))

    @nvml_function("none")
    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return int(self._static(self._scenario.cuda_driver_version))

    nvmlSystemGetCudaDriverVersion_v2 = nvml_twin(nvmlSystemGetCudaDriverVersion)

    # -- finding devices ----------------------------------------------------------------------

    @nvml_function("none")
    def nvmlDeviceGetCount(self) -> int:
        return len(self._scenario.gpus)

    @nvml_function("none")
    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDeviceHandle:
        """A handle for GPU ``index``; GPU_IS_LOST once that GPU has fallen off the bus."""
        if not isinstance(index, int) or not 0 <= index < len(self._scenario.gpus):
            nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        handle = FakeDeviceHandle(index)
        self._check_device("nvmlDeviceGetHandleByIndex", handle, allow_mig=False)
        return handle

    @nvml_function("none")
    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> FakeDeviceHandle:
        """A GPU or MIG handle by UUID; an unknown UUID is NOT_FOUND."""
        wanted = uuid.decode() if isinstance(uuid, bytes) else uuid
        for gpu_index, gpu in enumerate(self._scenario.gpus):
            if gpu.uuid == wanted:
                handle = FakeDeviceHandle(gpu_index)
            else:
                slots = [i for i, mig in enumerate(gpu.mig_devices) if mig.uuid == wanted]
                if not slots:
                    continue
                handle = FakeDeviceHandle(gpu_index, slots[0])
            self._check_device("nvmlDeviceGetHandleByUUID", handle, allow_mig=True)
            return handle
        nvml_error(pynvml.NVML_ERROR_NOT_FOUND)


_ABSENT = object()


def _is_library_call(name: str, value: Any) -> bool:
    return (
        name.startswith("nvml")
        and isinstance(value, types.FunctionType)
        and name not in _PYNVML_HELPERS
    )


def _function_not_found(name: str) -> Callable[..., NoReturn]:
    def missing(*_args: Any, **_kwargs: Any) -> NoReturn:
        nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    missing.__name__ = name
    missing.__qualname__ = f"FakeNvml.{name}"
    missing.__doc__ = f"{name} is not simulated: NVML_ERROR_FUNCTION_NOT_FOUND, as an old driver."
    return missing
