"""Simulated GPUs: a pynvml-shaped module driven by a scenario file.

Everything above NVML (sampling, the dashboard, the CUDA mapping, job launching) runs on it
unchanged, on machines without a GPU: tests, ``make demo``, screenshots, and reproducing
what a user saw on a server. Scenarios ship in the package by name (``demo``) or come from
a path.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from gputop.core.errors import ScenarioError
from gputop.core.fake.nvml import FakeDeviceHandle, FakeNvml, SimulatedProcess
from gputop.core.fake.scenario import Scenario, load_scenario
from gputop.core.numbers import quoted

__all__ = [
    "BUILTIN_SCENARIOS",
    "FakeDeviceHandle",
    "FakeNvml",
    "Scenario",
    "SimulatedProcess",
    "load_fake_nvml",
    "load_scenario",
    "resolve_scenario_path",
]

BUILTIN_SCENARIOS: tuple[str, ...] = ("demo", "v100x4", "dgx-h100", "mixed", "mig", "faulty")
"""Scenario names that ship with gputop, most useful first."""


def resolve_scenario_path(name_or_path: str) -> Path:
    """A built-in name to its packaged file, anything else to an existing file path."""
    if name_or_path in BUILTIN_SCENARIOS:
        packaged = resources.files(__package__) / "scenarios" / f"{name_or_path}.json"
        return Path(str(packaged))
    path = Path(name_or_path).expanduser()
    builtin = f"built-in scenarios: {', '.join(BUILTIN_SCENARIOS)}"
    shown = str(name_or_path)  # a Path from a test or a caller, too
    shown = shown if len(shown) <= 200 else quoted(shown)
    try:  # Path.is_file raises on EACCES (a file in a folder the user cannot enter)
        if path.is_file():
            return path
        exists = path.exists()
    except OSError as error:
        raise ScenarioError(shown, f"cannot read the file: {error.strerror}") from None
    if exists:
        problem = f"not a file ({builtin})"
    elif path.suffix == "" and len(path.parts) == 1:
        problem = f"no built-in scenario of that name, and no such file ({builtin})"
    else:
        problem = f"no such scenario file ({builtin})"
    raise ScenarioError(shown, problem)


def load_fake_nvml(
    name_or_path: str, frozen_time: float | None = None, speed: float = 1.0
) -> FakeNvml:
    """A simulated NVML module for a built-in scenario name or a scenario file path.

    The module is not initialised: call ``nvmlInit()`` as with the real one.
    """
    return FakeNvml(load_scenario(resolve_scenario_path(name_or_path)), frozen_time, speed)
