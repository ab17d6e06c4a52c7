"""Launch a job pinned to chosen cards, and return at once.

Everything a person can get wrong is checked before anything is recorded or started; then
the job is recorded as waiting and its supervisor started detached (supervisor.py): the
caller may exit or lose its terminal at once.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gputop.core.errors import GputopError, UsageError
from gputop.core.jobs.child import start_detached
from gputop.core.jobs.command import CommandPlan, default_name, plan_command
from gputop.core.jobs.launchers import (
    LauncherPlan,
    PortFinder,
    free_port,
    plain_python_note,
    plan_launcher,
)
from gputop.core.jobs.model import DEFAULT_GRACE_S, Job, RunMode, checked_grace
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_rows import ProcessSeen, ended, supervisor_seen
from gputop.core.jobs.unrecorded import RUN_DIR
from gputop.core.model import Snapshot
from gputop.core.numbers import PID_MAX_LIMIT, digits_within
from gputop.core.private_files import write_env_file
from gputop.core.records import frozen
from gputop.core.units import counted
from gputop.core.visibility import pin_environment

if TYPE_CHECKING:
    from gputop.core.free_cards import FreePolicy

SUPERVISOR_MODULE = "gputop.core.jobs.supervisor"


class LaunchError(GputopError):
    """The job was recorded but its supervisor could not be started."""


@frozen(slots=False)
class LaunchRequest:
    command: str | Sequence[str]
    physical_indices: Sequence[int | str]
    """In cuda order: GPUs by index, MIG instances by their full ``MIG-`` UUID."""
    name: str | None = None
    cwd: str | None = None
    mode: RunMode = RunMode.DETACHED
    wait: bool = False
    """Queue the job until its cards are free by ``policy``."""
    wait_count: int | None = None
    """``--auto N --wait``: no cards yet; take N free ones once that many are free."""
    policy: FreePolicy | None = None
    grace_s: float = DEFAULT_GRACE_S
    notify_command: tuple[str, ...] = ()
    """The argv run when the job starts after waiting and when it ends (notify.py)."""
    log_max_bytes: int | None = None
    """The log's size cap (logs.py); default ``settings.LOG_MAX``."""


@frozen(slots=False)
class PreparedLaunch:
    """A launch request checked whole: what ``launch_job`` records and starts, as is."""

    request: LaunchRequest
    plan: CommandPlan
    cwd: str
    name: str
    grace_s: float
    tmux: str | None
    indices: tuple[int, ...]
    uuids: tuple[str, ...]
    env: dict[str, str]
    launcher: LauncherPlan | None = None
    notes: tuple[str, ...] = ()
    """For the person launching: what gputop added or what the command will do."""
    warnings: tuple[str, ...] = ()


def prepare_launch(
    request: LaunchRequest,
    snapshot: Snapshot,
    environ: Mapping[str, str] = os.environ,
    port_finder: PortFinder | None = free_port,
) -> PreparedLaunch:
    """Check everything a person can get wrong, touching nothing: a rejected launch writes
    nothing (callers prepare, then open the store). A multi-card launcher gets its process
    count and a free port (launchers.py)."""
    cwd = _working_directory(request.cwd)
    typed = plan_command(request.command, environ, cwd)
    cards = request.wait_count or len(request.physical_indices)
    launcher = plan_launcher(typed, cards, environ, port_finder)
    plan = typed
    if launcher is not None:
        plan = replace(typed, argv=launcher.argv, display=shlex.join(launcher.argv))
    said = (typed.note, *(launcher.notes if launcher else ()), plain_python_note(typed, cards))
    notes = tuple(note for note in said if note)
    warnings = launcher.warnings if launcher else ()
    name = _job_name(request.name, plan)
    grace_s = checked_grace(request.grace_s)
    tmux = _tmux(environ) if request.mode is RunMode.TMUX else None
    if request.wait_count is not None:
        if request.wait_count < 1:
            raise UsageError(f"Cannot wait for {request.wait_count} GPUs: ask for at least 1.")
        check_gpu_count(snapshot, request.wait_count)
        indices: tuple[int, ...] = ()
        uuids: tuple[str, ...] = ()
        env: dict[str, str] = {}
    else:
        pinning = pin_environment(
            snapshot.gpus,
            list(request.physical_indices),
            use_uuids=not (launcher and launcher.pin_with_indices),
            driver_version=snapshot.driver_version,
        )
        indices = tuple(device.physical_index for device in pinning.devices)
        uuids = tuple(device.mig_uuid or device.uuid or "" for device in pinning.devices)
        env = dict(pinning.env)
    return PreparedLaunch(
        request, plan, cwd, name, grace_s, tmux, indices, uuids, env, launcher, notes, warnings
    )


def check_gpu_count(snapshot: Snapshot, count: int) -> None:
    """Refuse asking for more GPUs than the machine has: such a job could never start."""
    have = len(snapshot.gpus)
    if count > have:
        raise UsageError(
            f"Cannot use {counted(count, 'GPU')}: this machine has {counted(have, 'GPU')}, "
            "so such a job could never start."
        )


def launch_job(
    store: JobStore,
    request: LaunchRequest | PreparedLaunch,
    snapshot: Snapshot,
    environ: Mapping[str, str] = os.environ,
) -> Job:
    """Check, record and start a job; returns it (still waiting for its supervisor)."""
    ready = request
    if not isinstance(ready, PreparedLaunch):
        ready = prepare_launch(ready, snapshot, environ)
    asked, policy = ready.request, ready.request.policy
    job = store.create_job(
        Job(
            name=ready.name,
            command=ready.plan.argv,
            command_text=ready.plan.text,
            uses_shell=ready.plan.uses_shell,
            cwd=ready.cwd,
            physical_indices=ready.indices,
            uuids=ready.uuids,
            env=ready.env,
            mode=asked.mode,
            grace_s=ready.grace_s,
            wait_for_free=asked.wait or asked.wait_count is not None,
            wait_count=asked.wait_count,
            wait_min_free_mib=None if policy is None else policy.min_free_mib,
            wait_max_util_percent=None if policy is None else policy.max_util_percent,
        )
    )
    store.add_history(ready.plan.text)
    try:
        (_start_detached if ready.tmux is None else _start_in_tmux)(store, job, environ, ready)
    except (OSError, subprocess.SubprocessError, LaunchError) as error:
        message = str(error)
        store.record(job.id, ended(exit_code=126, note=f"could not start: {message}"))
        if isinstance(error, LaunchError):
            raise
        raise LaunchError(f"Job {job.id} could not be started: {message}.") from None
    return store.get(job.id)


def supervisor_argv(
    store: JobStore,
    job_id: int,
    tty: bool = False,
    log_max_bytes: int | None = None,
    notify: Sequence[str] = (),
) -> list[str]:
    """The supervisor's argv; each word of a notify command its own ``--notify-arg=WORD``."""
    argv = [sys.executable or "python3", "-m", SUPERVISOR_MODULE]
    argv += ["--state-dir", str(store.state_dir), "--job", str(job_id)]
    if log_max_bytes is not None:
        argv += ["--log-max", str(int(log_max_bytes))]
    argv += [f"--notify-arg={word}" for word in notify]
    return [*argv, "--tty"] if tty else argv


def _start_detached(
    store: JobStore, job: Job, environ: Mapping[str, str], ready: PreparedLaunch
) -> None:
    asked = ready.request
    # cwd "/": ``python -m`` puts the current directory first on sys.path, where a
    # directory named like a package of gputop's would be imported instead.
    argv = supervisor_argv(store, job.id, False, asked.log_max_bytes, asked.notify_command)
    process = start_detached(argv, "/", environ, job.log_path, output=False)
    _mark_supervisor(store, job.id, process.pid)
    # A long-lived caller (the dashboard) must reap the supervisor when it ends, or it
    # lingers as a zombie; a short-lived one (the CLI) exits and leaves it to init.
    threading.Thread(target=process.wait, name=f"reap-job-{job.id}", daemon=True).start()


def _start_in_tmux(
    store: JobStore, job: Job, environ: Mapping[str, str], ready: PreparedLaunch
) -> None:
    """A new tmux window running the supervisor on a terminal, without a shell string; the
    caller's environment (the window gets the tmux server's) goes in a private file the
    supervisor reads and deletes at once."""
    env_file = write_env_file(store.state_dir, RUN_DIR, job.id, environ)
    asked, tmux = ready.request, ready.tmux
    assert tmux is not None  # launch_job opens a window only where tmux was found
    supervisor = supervisor_argv(store, job.id, True, asked.log_max_bytes, asked.notify_command)
    argv = [
        tmux, "new-window", "-d", "-P", "-F", "#{pane_pid}", "-n", f"gputop-{job.id}",
        "-c", job.cwd, "-e", "PYTHONSAFEPATH=1", "--", *supervisor, "--env-file", env_file,
    ]  # fmt: skip
    try:
        result = subprocess.run(
            argv,
            env=dict(environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
        if result.returncode != 0:
            reason = (result.stderr or result.stdout).strip() or f"exit {result.returncode}"
            raise LaunchError(f"tmux could not open a window for job {job.id}: {reason}")
    except (OSError, subprocess.SubprocessError, LaunchError):
        with contextlib.suppress(OSError):
            os.unlink(env_file)
        raise
    pane_pid = digits_within(result.stdout, 1, PID_MAX_LIMIT)
    if pane_pid is not None:
        _mark_supervisor(store, job.id, pane_pid)


def _mark_supervisor(store: JobStore, job_id: int, pid: int) -> None:
    """Record the supervisor just started: its start as a time and in ticks since boot."""
    store.record(job_id, supervisor_seen(ProcessSeen.now(pid)))


def _tmux(environ: Mapping[str, str]) -> str:
    if not environ.get("TMUX"):
        raise UsageError(
            "Cannot run in a tmux window: gputop is not running inside tmux ($TMUX is not "
            "set). Start tmux first, or launch detached (the default)."
        )
    found = shutil.which("tmux", path=environ.get("PATH"))
    if found is None:
        raise UsageError("Cannot run in a tmux window: the tmux program is not on PATH.")
    return found


def _working_directory(cwd: str | None) -> str:
    if cwd is None or not cwd.strip():
        try:
            return os.getcwd()
        except FileNotFoundError:
            raise UsageError(
                "The current directory no longer exists: give the working directory."
            ) from None
    path = os.path.abspath(os.path.expanduser(cwd))
    if not os.path.exists(path):
        raise UsageError(f"The working directory {cwd} does not exist.")
    if not os.path.isdir(path):
        raise UsageError(f"The working directory {cwd} is not a directory.")
    if not os.access(path, os.X_OK):
        raise UsageError(f"The working directory {cwd} cannot be entered (permission denied).")
    return path


def _job_name(name: str | None, plan: CommandPlan) -> str:
    if name is None:
        return default_name(plan)
    cleaned = " ".join(name.split())
    if not cleaned:
        raise UsageError("The job name is empty: give a name, or leave it out for a default.")
    return cleaned
