"""Open the GPUs to sample: the real NVML driver, or a scenario of simulated ones.

``--fake NAME|PATH`` (or ``settings.FAKE``) selects a scenario; ``settings.FAKE_TIME``
freezes its clock so that the same scenario always gives the same readings, and
``settings.FAKE_SPEED`` runs it N times faster than real time (a recorder's test records
hours in seconds: docs/history.md). Start-up
failures of the real driver become one paragraph that names the cause and what to try.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gputop.core import settings
from gputop.core.errors import NvmlUnavailableError
from gputop.core.host_stats import HostStats, simulated_host_stats
from gputop.core.model import ProcessOrigin
from gputop.core.probes.background import BackgroundDriverProbe
from gputop.core.sampling.host_processes import HostFacts, HostProcessTable
from gputop.core.sampling.kmsg_xid import KMSG
from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions
from gputop.core.sampling.pid_namespace import local_pid_guard
from gputop.core.sampling.process_env import CudaEnvironment

TRY_FAKE = "To try gputop without a GPU, add --fake demo (simulated GPUs)."


def open_backend(
    fake: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    options: SamplingOptions | None = None,
) -> NvmlBackend:
    """A ready backend, on simulated GPUs when ``fake`` or ``settings.FAKE`` names a scenario."""
    fake = fake or settings.FAKE.read(environ) or None
    if fake:
        frozen = settings.FAKE_TIME.given(environ)
        return _open_fake(fake, frozen, options, settings.FAKE_SPEED.read(environ))
    return _open_real(options)


def environment_for_jobs(
    fake: str | None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment launched jobs inherit: ``--fake`` is handed on, as an absolute path
    for a file, so a job's supervisor waiting for free cards reads the same simulated GPUs."""
    result = dict(os.environ if environ is None else environ)
    if fake:
        result[settings.FAKE.name] = os.path.abspath(fake) if os.path.exists(fake) else fake
    return result


def _open_fake(
    name: str,
    frozen_time: float | None,
    options: SamplingOptions | None,
    speed: float = 1.0,
) -> NvmlBackend:
    from gputop.core.fake import load_fake_nvml

    nvml = load_fake_nvml(name, frozen_time, speed)
    nvml.nvmlInit()

    def simulated(pid: int) -> HostFacts | None:
        process = nvml.simulated_process(pid)
        if process is None or (process.user is None and not process.command):
            return None
        return HostFacts(
            ProcessOrigin.SIMULATED,
            user=process.user,
            command=process.command,
            cpu_percent=process.cpu_percent,
            host_memory_bytes=process.host_memory_bytes,
            start_time=process.start_time,
            environment=CudaEnvironment(process.environment) if process.environment else None,
        )

    def host_stats(now: float) -> HostStats:
        load, memory = nvml.simulated_host_load()
        return simulated_host_stats(
            load, memory, uptime_s=nvml.simulated_uptime_s(), peak=nvml.simulated_host_peak
        )

    backend = NvmlBackend(
        nvml,
        clock=nvml.epoch_time,
        hostname=nvml.scenario.hostname,
        simulated=nvml.scenario.description or f"simulated GPUs from {name}",
        host_processes=HostProcessTable(simulated=simulated, guard=local_pid_guard()),
        options=options,
        activity_clock=_Ticks() if frozen_time is not None else None,
        host_stats=host_stats,
        cuda_sm_counts=nvml.simulated_sm_count,
    )
    if frozen_time is not None:
        # A frozen clock reads the same every sample: GPM's figures too, from the first one
        # (a test or a screenshot must not depend on how soon a second sample comes).
        backend.settle_activity()
    return backend


class _Ticks:
    """A clock for GPM's 100 ms rule under a frozen scenario: a second passes per reading."""

    def __init__(self) -> None:
        self._now = 0.0

    def __call__(self) -> float:
        self._now += 1.0
        return self._now


def _open_real(options: SamplingOptions | None) -> NvmlBackend:
    import pynvml

    problem = binding_problem(pynvml)
    if problem is not None:
        raise NvmlUnavailableError(problem)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        raise NvmlUnavailableError(explain_init_failure(pynvml, error)) from None
    except OSError as error:
        raise NvmlUnavailableError(
            f"The NVIDIA driver library could not be loaded ({error}). {TRY_FAKE}"
        ) from None
    kernel_log = settings.KERNEL_LOG.given()  # empty: no kernel log
    return NvmlBackend(
        pynvml,
        options=options,
        host_processes=HostProcessTable(guard=local_pid_guard()),
        driver_answer=(
            BackgroundDriverProbe().answer if options is None or options.driver_probe else None
        ),
        kernel_log=KMSG if kernel_log is None else kernel_log or None,
    )


def binding_problem(module: Any) -> str | None:
    """Why the imported ``pynvml`` is not nvidia-ml-py's, for a person; ``None`` when it is.

    The deprecated ``pynvml`` package (gpuopenanalytics, 11.x) installs a ``pynvml/``
    directory that Python prefers over nvidia-ml-py's ``pynvml.py``: an older copy of the
    binding without the calls gputop relies on (``_nvmlGetFunctionPointer``, the v2 memory
    struct). nvidia-ml-py's module is a single file named ``pynvml.py``.
    """
    location = getattr(module, "__file__", None) or ""
    shadowed = Path(location).name != "pynvml.py"
    lacking = [name for name in REQUIRED_BINDING_NAMES if not hasattr(module, name)]
    if not shadowed and not lacking:
        return None
    installed = _distribution_version("pynvml")
    package = f"the deprecated 'pynvml' package {installed}" if installed else "another module"
    where = f" ({location})" if location else ""
    why = (
        f"it is a package directory{where}, not nvidia-ml-py's pynvml.py"
        if shadowed
        else f"it lacks {', '.join(lacking)}"
    )
    return (
        f"The 'pynvml' module Python imports is {package}, shadowing nvidia-ml-py: {why}. "
        "Remove it and reinstall the official binding: "
        "'pip uninstall pynvml' then 'pip install --force-reinstall nvidia-ml-py'. "
        f"{TRY_FAKE}"
    )


REQUIRED_BINDING_NAMES = ("_nvmlGetFunctionPointer", "c_nvmlMemory_v2_t", "nvmlMemory_v2")
"""What gputop uses from nvidia-ml-py beyond the calls themselves (its floor has them all)."""


def _distribution_version(name: str) -> str | None:
    from importlib import metadata  # only for a message: not on every start (docs/speed.md)

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
    except Exception:  # a broken installation's metadata: no version to name
        return None


def explain_init_failure(nvml: Any, error: Exception) -> str:
    """One paragraph for a person: what is wrong with the driver and what to do."""
    if isinstance(error, nvml.NVMLError_LibraryNotFound):
        cause = (
            "No NVIDIA driver found: the NVML library (libnvidia-ml.so.1) is not installed "
            "or not on the library path. gputop needs an NVIDIA GPU with its driver."
        )
    elif isinstance(error, nvml.NVMLError_DriverNotLoaded):
        cause = (
            "The NVIDIA kernel driver is not loaded (nvidia-smi will say the same). Load it "
            "with 'sudo modprobe nvidia' or check the driver installation."
        )
    elif isinstance(error, nvml.NVMLError_LibRmVersionMismatch):
        cause = (
            "The NVIDIA driver's kernel module and its library have different versions, "
            "usually after a driver upgrade without a reboot. Reboot, or reload the nvidia "
            "kernel modules."
        )
    elif isinstance(error, nvml.NVMLError_NoPermission):
        cause = "NVML refused access to the GPUs (no permission to open /dev/nvidia*)."
    else:
        cause = f"NVML failed to start: {error}."
    return f"{cause} {TRY_FAKE}"
