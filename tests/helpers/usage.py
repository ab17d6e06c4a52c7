"""Helpers for the tests of what each job used: a scenario that puts jobs on their cards."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCENARIOS = Path(__file__).parents[2] / "gputop" / "core" / "fake" / "scenarios"


def scenario_file(tmp_path: Path, profile: dict[str, object] | None) -> Path:
    """v100x4 with a job profile (docs/scenario.md), and accounting mode on for GPU 1."""
    document = json.loads((SCENARIOS / "v100x4.json").read_text())
    if profile is not None:
        document["job_profile"] = profile
    document["gpus"][1]["accounting_mode"] = True
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(document))
    return path


def sleeper(seconds: float) -> list[str]:
    """A job that only waits: it is on its cards because it is pinned to them."""
    return [sys.executable, "-c", f"import time; time.sleep({seconds})"]
