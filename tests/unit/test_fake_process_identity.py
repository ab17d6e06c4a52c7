"""A simulated process is the same process in every run of its scenario (issue 40): its pid
and start time do not depend on when the run began, so what one run recorded is found by
the next one's history (``H``, docs/history.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gputop.core.history.process_history import read_process_history

DAY_S = 86400.0


def _gputop(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m gputop ARGV`` as its own process, on the scenario's running clock."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_FAKE")}
    return subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _identities(scenario: str) -> dict[int, float | None]:
    """pid -> start time of every process a ``snapshot --json`` run of ``scenario`` lists."""
    result = _gputop("snapshot", "--json", "--fake", scenario)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return {
        process["pid"]: process["start_time"]
        for gpu in document["gpus"]
        for process in [*gpu["processes"], *(p for m in gpu["mig_devices"] for p in m["processes"])]
    }


def test_two_runs_of_a_scenario_show_each_process_with_the_same_pid_and_start_time() -> None:
    first = _identities("dgx-h100")
    second = _identities("dgx-h100")
    assert len(first) == 200
    assert second == first
    started = [start for start in first.values() if start is not None]
    assert len(started) == len(first)  # every process of dgx-h100 says when it started
    assert max(started) <= time.time()  # none started in the future


def test_a_process_a_recording_saw_is_found_by_the_next_runs_history(tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite3"
    recorded = _gputop(
        "record", "--fake", "demo", "--db", str(store), "--interval", "1", "--count", "2"
    )
    assert recorded.returncode == 0, recorded.stderr
    shown = _identities("demo")  # the dashboard's next run: a new process, a new clock
    pid = 4201017  # alice's training run on GPU 0
    history = read_process_history(store, pid, shown[pid], DAY_S, time.time() + 60.0, 40)
    assert history.problem is None
    assert history.summary is not None, "the recording's process was not found"
    assert history.summary.gpu_seconds > 0
    assert any(value for value in history.memory_used_bytes)
