"""Reality checks for the CUDA rules: the driver itself, and torch in the user's interpreter.

The torch probe's names are imported when first asked for: the dashboard runs it only once
its first frame is shown."""

from typing import TYPE_CHECKING

from gputop.core.probes.driver import (
    DriverProbe,
    DriverProbeResult,
    ProbedDevice,
    compare_with_rules,
    order_note,
    run_driver_probe,
)

if TYPE_CHECKING:
    from gputop.core.probes.torch_probe import TorchProbeResult, probe_torch

__all__ = [
    "DriverProbe",
    "DriverProbeResult",
    "ProbedDevice",
    "TorchProbeResult",
    "compare_with_rules",
    "order_note",
    "probe_torch",
    "run_driver_probe",
]


def __getattr__(name: str) -> object:
    if name in ("TorchProbeResult", "probe_torch"):
        from gputop.core.probes import torch_probe

        return getattr(torch_probe, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
