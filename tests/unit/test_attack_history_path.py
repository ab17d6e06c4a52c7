"""The dashboard's past from a history store at a path no file can have (GPUTOP_HISTORY_DB or
GPUTOP_STATE_DIR of 400 characters: ENAMETOOLONG) is no history, as a store that cannot be
read is (history/recent.py); the dashboard exited 70 ("internal error") before it opened."""

from __future__ import annotations

from pathlib import Path

from gputop.core.fake import FakeNvml, load_scenario, resolve_scenario_path
from gputop.core.history.recent import dashboard_history, refill_read


def test_a_path_too_long_for_any_file_is_no_history(tmp_path: Path) -> None:
    too_long = tmp_path / ("9" * 400) / "history.sqlite3"
    assert refill_read(too_long, 1_700_000_000.0, 60) is None  # raised OSError before
    nvml = FakeNvml(load_scenario(resolve_scenario_path("demo")))
    history = dashboard_history(nvml, too_long)
    assert history.length > 0  # the dashboard's own, empty or simulated, as with no store
