"""A GPU NVML refuses (NO_PERMISSION, as under a device cgroup) is not a CUDA device here."""

from __future__ import annotations

import pytest
from helpers.visibility_machines import U, gpu

from gputop.core.model import GpuSample
from gputop.core.visibility import resolve_visibility
from gputop.core.visibility.inverse import pin_environment
from gputop.core.visibility.model import SelectionError


def _refused(physical_index: int) -> GpuSample:
    """What the backend makes of a refused handle: index only, nothing else known."""
    return GpuSample(physical_index, uuid=None, name=None, pci_bus_id=None, no_access=True)


def _box() -> tuple[GpuSample, ...]:
    return (_refused(0), gpu(1, U[1]), gpu(2, U[2]))


def test_an_inaccessible_gpu_is_not_cuda_0() -> None:
    visibility = resolve_visibility(_box(), "550.127.05", None, None)
    assert [d.physical_index for d in visibility.devices] == [1, 2]


def test_leaving_out_an_inaccessible_gpu_is_said_in_a_warning() -> None:
    visibility = resolve_visibility(_box(), "550.127.05", None, None)
    (warning,) = [w for w in visibility.warnings if w.code == "no-access"]
    assert "GPU 0" in warning.message


def test_pinning_an_inaccessible_gpu_is_refused_with_the_reason() -> None:
    with pytest.raises(SelectionError, match="refuses access"):
        pin_environment(_box(), [0])
