"""``gputop snapshot --json`` against ``nvidia-smi --query-gpu`` read just before and after."""

from __future__ import annotations

import pytest

from gpu.driver import DRIVER

if not DRIVER.present:
    pytest.skip(DRIVER.reason, allow_module_level=True)

from gpu import compare
from gpu.conftest import gputop_json, smi_query


def test_snapshot_matches_nvidia_smi(result, gputop) -> None:
    before = smi_query()
    document = gputop_json(gputop, "snapshot", "--json")
    after = smi_query()
    result.comparisons += compare.compare_readings(
        compare.readings_from_snapshot(document), before, after
    )
    result.numbers["gpus"] = len(before)
    assert result.comparisons
    assert not result.failed, [c.to_json() for c in result.failed]
