"""``snapshot --json``'s health counters against ``nvidia-smi -q -d ECC,PAGE_RETIREMENT,
ROW_REMAPPER`` read just before and after (issue 42, docs/health.md)."""

from __future__ import annotations

import subprocess

import pytest

from gpu.driver import DRIVER

if not DRIVER.present:
    pytest.skip(DRIVER.reason, allow_module_level=True)

from gpu import health_compare
from gpu.conftest import gputop_json


def smi_health_text() -> str:
    done = subprocess.run(
        health_compare.HEALTH_COMMAND, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def test_health_counters_match_nvidia_smi(result, gputop) -> None:
    before = smi_health_text()
    document = gputop_json(gputop, "snapshot", "--json")
    after = smi_health_text()
    result.comparisons += health_compare.compare_health(document, before, after)
    result.numbers["gpus"] = len(document["gpus"])
    result.numbers["verdicts"] = [gpu["health"]["verdict"] for gpu in document["gpus"]]
    assert result.comparisons
    assert not result.failed, [c.to_json() for c in result.failed]
