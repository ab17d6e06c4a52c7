"""A recorder running on the bench's scenario, so the dashboards start with its store present.

Issue 19 measures the dashboard "with a recorder's store present": ``gputop record`` on the
same simulated GPUs and live stand-ins, writing the default store of a private state
directory (``GPUTOP_STATE_DIR``) that the dashboards under measurement are given too. A
dashboard then fills its sparklines from the store as it starts (docs/history.md, "In the
dashboard"). The recorder is a process of its own: its CPU is not the dashboard's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from gputop.core.history.store import DB_NAME

RECORD_INTERVAL_S = 5.0
"""The recorder's default interval, as issue 19's recorder target."""
FIRST_SAMPLE_TIMEOUT_S = 30.0


@contextlib.contextmanager
def recorder_store(scenario: Path) -> Iterator[Path]:
    """A state directory whose history store a running ``gputop record`` fills; the
    recorder is stopped (SIGTERM: it writes its last batch) when this exits."""
    with tempfile.TemporaryDirectory(prefix="gputop-bench-state-") as name:
        state_dir = Path(name)
        state_dir.chmod(0o700)
        log = state_dir / "record.log"
        env = dict(os.environ, GPUTOP_STATE_DIR=str(state_dir))
        env.pop("GPUTOP_FAKE_SPEED", None)
        command = [sys.executable, "-m", "gputop", "record", "--fake", str(scenario)]
        command += ["--interval", f"{RECORD_INTERVAL_S:g}"]
        with log.open("wb") as output:
            recorder = subprocess.Popen(command, env=env, stdout=output, stderr=output)
        try:
            _wait_for_samples(state_dir / DB_NAME, recorder, log)
            yield state_dir
        finally:
            if recorder.poll() is None:
                recorder.send_signal(signal.SIGTERM)
            try:
                recorder.wait(10)
            except subprocess.TimeoutExpired:
                recorder.kill()
                recorder.wait()


def _wait_for_samples(store: Path, recorder: subprocess.Popen[bytes], log: Path) -> None:
    """Until the store holds the recorder's first sample of every GPU."""
    deadline = time.monotonic() + FIRST_SAMPLE_TIMEOUT_S
    while time.monotonic() < deadline:
        if recorder.poll() is not None:
            raise SystemExit(f"gputop record exited {recorder.returncode}:\n{log.read_text()}")
        if store.exists() and _gpu_samples(store) > 0:
            return
        time.sleep(0.2)
    raise SystemExit(f"gputop record wrote no sample in {FIRST_SAMPLE_TIMEOUT_S:g} s")


def _gpu_samples(store: Path) -> int:
    try:
        connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return int(connection.execute("SELECT COUNT(*) FROM gpu_samples").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        connection.close()
