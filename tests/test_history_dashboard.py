"""The dashboard's sparklines start filled from a recorder's store (docs/history.md)."""

from __future__ import annotations

import json
from pathlib import Path

from history_helpers import holders_scenario, record_stepped

from gputop.core.history.recent import dashboard_history
from gputop.core.history.store import default_history_path
from gputop.core.sampling.source import open_backend


def busier(scenario: str, tmp_path: Path) -> str:
    """The same cards at 90 % instead of 50 %: what the simulation alone would show."""
    document = json.loads(Path(scenario).read_text())
    for gpu in document["gpus"]:
        gpu["utilization_gpu"] = 90
    path = tmp_path / "busier.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_sparklines_start_with_what_the_recorder_stored(tmp_path: Path) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=120)  # to t=600 s, at 50 %
    backend = open_backend(busier(scenario, tmp_path), environ={"GPUTOP_FAKE_TIME": "600"})
    try:
        history = dashboard_history(backend.nvml)
        series = history.series("GPU-11111111-aaaa-bbbb-cccc-000000000000", 0)
    finally:
        backend.close()
    assert len(series) >= 100
    assert set(series[-100:]) == {50}


def test_without_a_store_the_sparklines_start_as_before(tmp_path: Path) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    backend = open_backend(busier(scenario, tmp_path), environ={"GPUTOP_FAKE_TIME": "600"})
    try:
        series = dashboard_history(backend.nvml).series(
            "GPU-11111111-aaaa-bbbb-cccc-000000000000", 0
        )
    finally:
        backend.close()
    assert set(series[-100:]) == {90}


def test_a_store_with_nothing_recent_is_no_history(tmp_path: Path) -> None:
    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=12)  # one minute, long before
    backend = open_backend(busier(scenario, tmp_path), environ={"GPUTOP_FAKE_TIME": "86400"})
    try:
        series = dashboard_history(backend.nvml).series(
            "GPU-11111111-aaaa-bbbb-cccc-000000000000", 0
        )
    finally:
        backend.close()
    assert set(series[-100:]) == {90}
