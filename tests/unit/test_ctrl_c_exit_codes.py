"""Ctrl-C ends a command that runs until interrupted with status 130, as a shell reports a
program ended by SIGINT (128 + 2), whichever command it is (issue 40: ``jobs wait`` said 130,
``jobs log -f`` and ``snapshot --watch`` 0). Each runs as its own process and gets SIGINT
once it has shown it is running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from helpers.waiting import wait_for

WAIT_S = 30.0


def _start(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gputop", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _interrupted(process: subprocess.Popen[str], shown: str) -> tuple[int, str]:
    """Read ``process``'s output until ``shown`` appears, SIGINT it, and return its status
    and standard error."""
    assert process.stdout is not None
    seen = ""
    try:
        while shown not in seen:
            line = process.stdout.readline()
            assert line, f"ended before showing {shown!r}: {process.communicate()}"
            seen += line
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, stderr


def test_ctrl_c_ends_snapshot_watch_with_130() -> None:
    watch = _start("snapshot", "--fake", "v100x4", "--watch", "0.2", "--json")
    code, stderr = _interrupted(watch, '"schema"')
    assert code == 130, stderr
    assert "Traceback" not in stderr


def test_ctrl_c_ends_snapshot_hosts_watch_with_130() -> None:
    watch = _start("snapshot", "--hosts", "local", "--fake", "v100x4", "--watch", "0.2", "--json")
    code, stderr = _interrupted(watch, '"kind": "lab"')
    assert code == 130, stderr
    assert "Traceback" not in stderr


def _running_job(state_dir: Path) -> None:
    """Job 1, which says hello and then sleeps, running on simulated GPU 2."""
    from gputop.core.jobs.store import JobStore

    started = subprocess.run(
        [sys.executable, "-m", "gputop", "run", "--fake", "v100x4", "--gpus", "2", "--",
         "sh", "-c", "echo hello from the job; sleep 60"],
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr

    def running() -> bool:
        with JobStore.open(state_dir) as store:
            return store.get(1).pid is not None

    wait_for(running, "job 1 to start")


def test_ctrl_c_ends_jobs_log_follow_with_130(state_dir: Path) -> None:
    _running_job(state_dir)
    follow = _start("jobs", "log", "-f", "1")
    code, stderr = _interrupted(follow, "hello from the job")
    assert code == 130, stderr
    assert "Traceback" not in stderr


def test_ctrl_c_ends_jobs_wait_with_130_as_before(state_dir: Path) -> None:
    _running_job(state_dir)
    waiting = _start("jobs", "wait", "1")
    assert waiting.stdout is not None and waiting.stderr is not None
    wait_for(lambda: _has_the_store_open(waiting.pid, state_dir), "jobs wait to be waiting")
    waiting.send_signal(signal.SIGINT)
    _, stderr = waiting.communicate(timeout=WAIT_S)
    assert waiting.returncode == 130, stderr
    assert "Traceback" not in stderr


def _has_the_store_open(pid: int, state_dir: Path) -> bool:
    """The process has opened the job store: it is in its wait, which prints nothing."""
    import psutil

    try:
        return any(Path(f.path).name == "jobs.sqlite3" for f in psutil.Process(pid).open_files())
    except psutil.Error:
        return False
