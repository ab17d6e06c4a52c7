"""Helpers for the job tests: a private store, a probe job, waiting with a deadline, cleanup.

Every process a test starts (supervisors, jobs, their children) is found through the test's
own job store afterwards and killed, so no test leaves anything running.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest

from gputop.core.jobs.launch import LaunchRequest, launch_job
from gputop.core.jobs.model import Job
from gputop.core.jobs.store import JobStore
from gputop.core.model import Snapshot
from gputop.core.process_control import group_members, process_alive
from gputop.core.sampling.source import open_backend
from helpers.waiting import wait_for

PROBE = str(Path(__file__).with_name("job_probe.py"))
PYTHON = sys.executable
V100 = (
    "GPU-5a9e5b38-bd6d-2f23-3b22-d42f6e26aa55",
    "GPU-96870f72-ff47-4de2-1bb0-99f7d8338c12",
    "GPU-f892c819-e030-1568-a2c9-521972500816",
    "GPU-80af15aa-d49f-aed3-cd11-01700346d7d9",
)
"""The UUIDs of the v100x4 scenario's GPUs 0-3."""
DEADLINE_S = 20.0

T = TypeVar("T")


def job_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private store for the test, simulated GPUs frozen at t=30 s, fast wait polls.

    Afterwards every job recorded in it is killed with its whole process group.
    """
    directory = tmp_path / "state"
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(directory))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "30")
    monkeypatch.setenv("GPUTOP_WAIT_POLL_S", "0.2")
    for name in ("GPUTOP_FAKE", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TMUX"):
        monkeypatch.delenv(name, raising=False)
    yield directory
    kill_everything_in(directory)


def kill_everything_in(directory: Path) -> None:
    if not (directory / "jobs.sqlite3").exists():
        return
    try:
        store = JobStore.open(directory)
    except Exception:
        return
    try:
        jobs = store.list_jobs()
    finally:
        store.close()
    protected = {os.getpid(), os.getpgid(0)}
    for job in jobs:
        supervisor, started = job.supervisor_pid, job.supervisor_start_time
        ours = bool(supervisor and started) and supervisor not in protected
        if ours and supervisor and process_alive(supervisor, started):
            with contextlib.suppress(OSError):
                os.kill(supervisor, signal.SIGKILL)
        if job.pid and job.pid_start_time and job.pid not in protected and _left(job):
            with contextlib.suppress(OSError):
                os.killpg(job.pid, signal.SIGKILL)


def _left(job: Job) -> bool:
    assert job.pid is not None
    return process_alive(job.pid, job.pid_start_time) or bool(group_members(job.pid))


def snapshot_of(scenario: str = "v100x4") -> Snapshot:
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "30"})
    try:
        return backend.sample()
    finally:
        backend.close()


def probe_command(out: Path, *options: str) -> list[str]:
    return [PYTHON, PROBE, str(out), *options]


def read_probe(out: Path) -> dict[str, Any]:
    """The probe's report, once it has written it."""
    wait_for(out.exists, f"the probe to write {out}", DEADLINE_S)
    return json.loads(out.read_text())


def asked_job(name: str = "train.py", **fields: Any) -> Job:
    """A launch as ``JobStore.create_job`` records it: ``python NAME`` on GPU 0, unless
    ``fields`` say otherwise."""
    command = tuple(fields.pop("command", ("python", name)))
    given: dict[str, Any] = {"command_text": " ".join(command), "uses_shell": False, "cwd": "/"}
    given.update(physical_indices=(0,), uuids=("GPU-0",), env={})
    given.update(fields)
    return Job(name=name, command=command, **given)


def launch(directory: Path, command: Any, gpus: tuple[int, ...] = (0,), **options: Any) -> Job:
    """``launch_job`` as the dashboard calls it, on the simulated cards of the scenario file
    ``GPUTOP_FAKE`` names (helpers/usage.py gives each test cards of its own), else v100x4."""
    scenario = os.environ.get("GPUTOP_FAKE", "")
    store = JobStore.open(directory)
    try:
        request = LaunchRequest(command=command, physical_indices=gpus, **options)
        cards = snapshot_of(scenario if Path(scenario).is_file() else "v100x4")
        return launch_job(store, request, cards)
    finally:
        store.close()


def job(directory: Path, job_id: int) -> Job:
    store = JobStore.open(directory)
    try:
        return store.get(job_id)
    finally:
        store.close()


def all_jobs(directory: Path) -> list[Job]:
    store = JobStore.open(directory)
    try:
        return store.list_jobs()
    finally:
        store.close()


def wait_for_job(
    directory: Path,
    job_id: int,
    test: Callable[[Job], object],
    what: str,
    timeout_s: float = DEADLINE_S,
) -> Job:
    """The job, read again until ``test(job)`` holds."""

    def check() -> Job | None:
        found = job(directory, job_id)
        return found if test(found) else None

    found = wait_for(check, f"job {job_id}: {what}", timeout_s)
    assert found is not None
    return found


def wait_until_ended(directory: Path, job_id: int, timeout_s: float = DEADLINE_S) -> Job:
    return wait_for_job(directory, job_id, lambda j: not j.is_active, "to end", timeout_s)


def wait_until_running(directory: Path, job_id: int) -> Job:
    return wait_for_job(directory, job_id, lambda j: j.pid is not None, "to start")


def wait_until_waiting(directory: Path, job_id: int) -> Job:
    """The job, once its supervisor has said what it waits for."""
    return wait_for_job(directory, job_id, lambda j: j.note, "a waiting reason")


def gone(pid: int) -> bool:
    """Ended: no such process, or a zombie nobody has reaped yet."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def supervisors_of(directory: Path) -> list[int]:
    """Live supervisor processes working on this store."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        ours = "gputop.core.jobs.supervisor" in cmdline and str(directory) in cmdline
        if ours and not gone(process.pid):
            found.append(process.pid)
    return found


def write_jobs(directory: str, worker: int, count: int) -> None:
    """One of several processes writing the store at once (run by multiprocessing); spawned
    children start faster on helpers.store_writer's, which this calls."""
    from helpers.store_writer import write_jobs as write

    write(directory, worker, count, V100)


def run_cli(*argv: str, env: dict[str, str] | None = None, timeout: float = 30) -> Any:
    """``python -m gputop ARGV`` in a child process, as a person runs it."""
    return subprocess.run(
        [PYTHON, "-m", "gputop", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
