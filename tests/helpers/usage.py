"""Helpers for the tests of what each job used: a scenario that puts jobs on their cards."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

SCENARIOS = Path(__file__).parents[2] / "gputop" / "core" / "fake" / "scenarios"


def scenario_file(tmp_path: Path, profile: dict[str, object] | None) -> Path:
    """v100x4 with a job profile (docs/scenario.md), accounting mode on for GPU 1, and
    UUIDs no other test's cards have."""
    document = json.loads((SCENARIOS / "v100x4.json").read_text())
    if profile is not None:
        document["job_profile"] = profile
    document["gpus"][1]["accounting_mode"] = True
    # Cards of this test's own: the simulation lists every live process of the machine
    # pinned to a card's UUID, so a job of another test running at the same moment (another
    # worker) would share the card with this one (each then reads half its SM %).
    for gpu in document["gpus"]:
        gpu["uuid"] = f"GPU-{uuid.uuid4()}"
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(document))
    return path


def sleeper(seconds: float) -> list[str]:
    """A job that only waits: it is on its cards because it is pinned to them."""
    return [sys.executable, "-c", f"import time; time.sleep({seconds})"]
