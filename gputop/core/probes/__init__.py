"""Reality checks for the CUDA rules: the driver itself, and torch in the user's interpreter."""

from gputop.core.probes.driver import (
    DriverProbe,
    DriverProbeResult,
    ProbedDevice,
    compare_with_rules,
    order_note,
    run_driver_probe,
)
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
