"""Stop a job: its whole process group, SIGTERM first, SIGKILL after its grace period.

Its supervisor is asked (SIGTERM to it) and records the end; only when it is gone are the
job's processes signalled here, each only when provably the job's (a left-over one must
carry its token), else none is and the message says why (docs/security.md).
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable

import psutil

from gputop.core.errors import GputopError
from gputop.core.jobs.model import JOB_ID_ENV, JOB_TOKEN_ENV, Job, JobState, checked_grace
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_rows import ended, stop_asked
from gputop.core.jobs.unrecorded import RecordedEnd, keep_end
from gputop.core.process_control import (
    START_TIME_TOLERANCE_S,
    IdentityUnproven,
    ProcessGone,
    Recorded,
    SignalRefused,
    Started,
    from_earlier_boot,
    live_processes_where,
    pinned,
    same_boot,
    send,
    signal_own_process,
    start_ticks,
)
from gputop.core.sampling.process_env import ENVIRON_LIMIT_BYTES, environ_value, read_environ

AFTER_KILL_WAIT_S = 5.0
WAIT_POLL_S = 0.1

SlurmCanceller = Callable[[int], None]
"""Cancels a job in Slurm by Slurm's job id; a GputopError with Slurm's words where Slurm
refuses (``gputop.core.slurm.submit.cancel``)."""


class JobNotRunning(GputopError):
    """The job has already ended (or is lost with nothing left to stop)."""


def stop_job(
    store: JobStore,
    job_id: int,
    grace_s: float | None = None,
    *,
    wait_s: float | None = None,
    cancel_in_slurm: SlurmCanceller | None = None,
) -> str:
    """Stop job ``job_id``; what happened, for a person. ``grace_s`` overrides the job's;
    ``wait_s``: how long to wait for the supervisor to record the end (the CLI's);
    ``cancel_in_slurm``: how a Slurm job is cancelled (without it: refused)."""
    if grace_s is not None:
        checked_grace(grace_s)
    job = store.get(job_id)
    if job.slurm_job_id is not None and job.state is not JobState.ENDED:
        return _cancel_in_slurm(store, job, cancel_in_slurm)  # from any host of the cluster
    here = socket.gethostname()
    if job.host and job.host != here:
        raise GputopError(f"Job {job.id} runs on {job.host}, not on {here}: stop it from there.")
    if job.state is JobState.ENDED:
        raise JobNotRunning(f"Job {job.id} has already ended ({job.status_text}).")
    if from_earlier_boot(job.boot_id, job.pid_start_time or job.created_at):
        raise JobNotRunning(
            f"Job {job.id} was launched before this machine restarted: none of its processes "
            "can still be running, and its old pids now belong to other processes; nothing "
            "was signalled."
        )
    grace = job.grace_s if grace_s is None else grace_s
    # Where the disk refuses it, stopping goes on: the supervisor keeps the end until it
    # can be recorded, and the signal never waits for it.
    store.try_record(job.id, stop_asked(grace_s))
    if job.is_active and job.supervisor_pid is not None:
        try:
            signal_own_process(
                job.supervisor_pid,
                job.supervisor_start_time,
                signal.SIGTERM,
                session_id=_expected_session(job.supervisor_session_id, job.supervisor_pid),
                boot_id=job.boot_id,
                start_ticks=job.supervisor_start_ticks,
            )
        except SignalRefused:  # not our supervisor any more: the job is handled directly
            job = store.get(job.id)  # it ended meanwhile, or is now lost
            if job.state is JobState.ENDED:
                raise JobNotRunning(
                    f"Job {job.id} has already ended ({job.status_text})."
                ) from None
        else:
            return _with_record_note(store, _asked_supervisor(store, job, grace, wait_s))
    return _with_record_note(store, _stop_without_supervisor(store, job, grace))


def _with_record_note(store: JobStore, text: str) -> str:
    if store.faults.fault is None:
        return text
    return (
        f"{text} The job store cannot be written now ({store.faults.fault.describe('it')}): "
        "the record of the stop follows when it can be written (docs/faults.md)."
    )


def _cancel_in_slurm(store: JobStore, job: Job, cancel: SlurmCanceller | None) -> str:
    """Slurm runs it: ``scancel`` (docs/slurm.md); Slurm's own message where it refuses."""
    if cancel is None:
        raise GputopError(
            f"Job {job.id} runs in Slurm (job {job.slurm_job_id}): stop it with "
            f"gputop jobs stop {job.id}, or scancel {job.slurm_job_id}."
        )
    cancel(job.slurm_job_id or 0)
    store.record(job.id, stop_asked())
    return f"Job {job.id} cancelled in Slurm (scancel {job.slurm_job_id})."


def _asked_supervisor(store: JobStore, job: Job, grace: float, wait_s: float | None) -> str:
    if wait_s is not None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            ended = store.get(job.id)
            if not ended.is_active:
                return f"Job {job.id} ({job.name}) stopped: {ended.status_text}."
            time.sleep(WAIT_POLL_S)
    if job.state is JobState.WAITING and job.pid is None:
        return f"Job {job.id} ({job.name}) will not start: it was stopped while waiting."
    return (
        f"Stopping job {job.id} ({job.name}): SIGTERM sent to its process group; SIGKILL "
        f"follows after {grace:g} s if it is still running."
    )


def _stop_without_supervisor(store: JobStore, job: Job, grace: float) -> str:
    """The supervisor is gone: end the job's processes ourselves, if any is provably left."""
    members = job_members(job)
    if not members:
        if job.state is JobState.LOST:
            raise JobNotRunning(
                f"Job {job.id} is lost ({job.note or 'its supervisor is gone'}) and none of "
                "its processes is running: nothing to stop."
            )
        note = "stopped; nothing of it was running"
        store.try_record(job.id, ended(note=note))
        return f"Job {job.id} ({job.name}) had nothing left running; it is marked as stopped."
    used = _end_members(job, grace)
    note = "stopped by gputop directly: its supervisor was gone"
    end = RecordedEnd(job.id, time.time(), None, used, True, note)
    if store.try_record(job.id, end.transition()) is not None:
        keep_end(store.state_dir, end)
    name = "SIGTERM" if used == signal.SIGTERM else "SIGKILL"
    return f"Job {job.id} ({job.name}) stopped ({name} to its process group)."


def _expected_session(recorded: int | None, pid: int) -> int:
    """The session recorded, or (jobs recorded before sessions were) the pid itself: the
    job and its supervisor each lead their own session."""
    return recorded if recorded is not None else pid


def job_members(job: Job) -> list[Recorded]:
    """The job's processes still running, each provably the job's and the user's own;
    IdentityUnproven (naming the process) where one in its session cannot be proven: then
    nothing at all may be signalled."""
    if job.pid is None or job.pid_start_time is None or job.started_at is None:
        return []
    if from_earlier_boot(job.boot_id, job.pid_start_time):
        return []
    session = _expected_session(job.session_id, job.pid)
    leader = Recorded(job.pid, job.pid_start_time, session, job.boot_id, job.pid_start_ticks)
    try:
        with pinned(leader, "The job's process"):
            leader_alive = True
    except ProcessGone:
        leader_alive = False
    if not leader_alive and _exists_not_zombie(job.pid):
        # The leader's pid names another process now. Linux reuses a pid only once no
        # process group or session has that id, so nothing of the job is left.
        return []
    members = []
    for pid in live_processes_where(os.getsid, session):
        started = _prove_member(job, pid, leader_alive)
        if started is not None:
            members.append(Recorded(pid, started.time, session, job.boot_id, started.ticks))
    return members


def _exists_not_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _prove_member(job: Job, pid: int, leader_alive: bool) -> Started | None:
    """The start of a process of the job's session proven the job's (None: it ended), or
    IdentityUnproven, by the rule of docs/security.md ("Signals go only to a process ...")."""
    label = f"Process {pid} in job {job.id}'s session"
    try:
        process = psutil.Process(pid)
        if process.uids().real != os.getuid():
            raise IdentityUnproven(f"{label} belongs to another user; gputop will not signal it.")
        started = Started(float(process.create_time()), start_ticks(pid))
        if leader_alive:
            return started
        if _started_before_the_job(job, started):
            raise IdentityUnproven(
                f"{label} started before the job did, so it is not the job's; nothing was "
                "signalled."
            )
        environ = read_environ(f"/proc/{pid}", ENVIRON_LIMIT_BYTES)
        if environ is None and not process.is_running():
            return None  # ended meanwhile: nothing to signal
        if environ is None:
            raise psutil.AccessDenied(pid)  # its environment is not ours to read
    except psutil.NoSuchProcess:
        return None  # ended meanwhile: nothing to signal
    except psutil.AccessDenied:
        raise IdentityUnproven(
            f"{label} cannot be inspected (permission denied), so gputop cannot prove it is "
            "the job's; nothing was signalled."
        ) from None
    key, wanted = (JOB_TOKEN_ENV, job.token) if job.token else (JOB_ID_ENV, str(job.id))
    if environ_value(environ, key) != wanted:
        raise IdentityUnproven(
            f"{label} does not carry the job's {key} in its environment, so gputop cannot "
            "prove it is the job's (its supervisor is gone); nothing was signalled. Check it "
            f"with ps -o pid,lstart,args -s {_expected_session(job.session_id, job.pid or 0)} "
            "and stop it yourself if it is."
        )
    return started


def _started_before_the_job(job: Job, started: Started) -> bool:
    if job.pid_start_ticks is not None and started.ticks is not None and same_boot(job.boot_id):
        return started.ticks < job.pid_start_ticks
    assert job.started_at is not None and started.time is not None
    return started.time < job.started_at - START_TIME_TOLERANCE_S


def _signal_members(job: Job, signum: int) -> int:
    """Signal every provable member now (each through a pidfd); returns how many."""
    sent = 0
    for member in job_members(job):
        try:
            with pinned(member, "The job's process") as pidfd:
                sent += send(pidfd, member.pid, signum)
        except SignalRefused:
            continue
    return sent


def _end_members(job: Job, grace: float) -> int:
    """SIGTERM to the job's processes, SIGKILL to what is left after ``grace``."""
    _signal_members(job, signal.SIGTERM)
    if _wait_until_gone(job, grace):
        return signal.SIGTERM
    _signal_members(job, signal.SIGKILL)
    _wait_until_gone(job, AFTER_KILL_WAIT_S)
    return signal.SIGKILL


def _wait_until_gone(job: Job, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if not job_members(job):
                return True
        except IdentityUnproven:
            return True  # what is left is not provably the job's: never signalled
        if time.monotonic() >= deadline:
            return False
        time.sleep(WAIT_POLL_S)
