"""The first check, and the one that skips the whole suite where there is no driver.

Without a driver this module alone is collected (conftest.py) and skips at import with
driver.py's reason: ``make test`` reports it once.
"""

from __future__ import annotations

import pytest

from gpu.driver import DRIVER

if not DRIVER.present:
    pytest.skip(DRIVER.reason, allow_module_level=True)

import subprocess

from gpu import compare
from gpu.conftest import gputop_json
from gpu.cuda_probe import cuda_driver_version


def test_driver_and_cuda_versions(result, gputop) -> None:
    """snapshot --json names the driver nvidia-smi names and the CUDA version libcuda gives."""
    document = gputop_json(gputop, "snapshot", "--json")
    driver = (
        subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.splitlines()[0]
        .strip()
    )
    cuda = cuda_driver_version()
    result.comparisons += [
        compare.Comparison(
            "driver version",
            document["driver_version"],
            driver,
            "exact",
            document["driver_version"] == driver,
        ),
        compare.Comparison(
            "CUDA driver version",
            document["cuda_driver_version"],
            cuda,
            "exact",
            document["cuda_driver_version"] == cuda,
        ),
        compare.Comparison(
            "simulated",
            document["simulated"],
            None,
            "null: a real driver",
            document["simulated"] is None,
        ),
    ]
    assert not result.failed, result.failed
