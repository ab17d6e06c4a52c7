"""Stop a job: its whole process group, SIGTERM first, SIGKILL after its grace period.

The normal path asks the job's supervisor (SIGTERM to it), which ends the group and records
the end itself. Only when the supervisor is gone (killed, lost) does this call signal the
job's group directly. Either way only the user's own processes are signalled, and only
after checking that a pid still names the process that was recorded (its start time), so
a reused pid is never hit.
"""

from __future__ import annotations

import os
import signal
import socket
import time

import psutil

from gputop.core.errors import GputopError, UsageError
from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.procgroup import end_group, group_members, process_alive
from gputop.core.jobs.store import JobStore
from gputop.core.process_control import SignalRefused, signal_own_process

WAIT_POLL_S = 0.1


class JobNotRunning(GputopError):
    """The job has already ended (or is lost with nothing left to stop)."""


def stop_job(
    store: JobStore, job_id: int, grace_s: float | None = None, *, wait_s: float | None = None
) -> str:
    """Stop job ``job_id``; returns what happened, for a person.

    ``grace_s`` overrides the job's grace period. ``wait_s``: wait up to that long for the
    supervisor to record the end (the CLI does; the dashboard refreshes instead).
    """
    if grace_s is not None and not 0 <= grace_s <= 24 * 3600:
        raise UsageError(f"The grace period must be between 0 and 86400 seconds, not {grace_s}.")
    job = store.get(job_id)
    here = socket.gethostname()
    if job.host and job.host != here:
        raise GputopError(f"Job {job.id} runs on {job.host}, not on {here}: stop it from there.")
    if job.state is JobState.ENDED:
        raise JobNotRunning(f"Job {job.id} has already ended ({job.status_text}).")
    grace = job.grace_s if grace_s is None else grace_s
    store.request_stop(job.id, grace_s)
    if job.is_active and job.supervisor_pid is not None:
        try:
            signal_own_process(job.supervisor_pid, job.supervisor_start_time, signal.SIGTERM)
        except SignalRefused:
            job = store.get(job.id)  # it ended meanwhile, or is now lost
            if job.state is JobState.ENDED:
                raise JobNotRunning(
                    f"Job {job.id} has already ended ({job.status_text})."
                ) from None
        else:
            return _asked_supervisor(store, job, grace, wait_s)
    return _stop_without_supervisor(store, job, grace)


def _asked_supervisor(store: JobStore, job: Job, grace: float, wait_s: float | None) -> str:
    if wait_s is not None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            ended = store.get(job.id)
            if ended.state is not JobState.RUNNING and ended.state is not JobState.WAITING:
                return f"Job {job.id} ({job.name}) stopped: {ended.status_text}."
            time.sleep(WAIT_POLL_S)
    if job.state is JobState.WAITING and job.pid is None:
        return f"Job {job.id} ({job.name}) will not start: it was stopped while waiting."
    return (
        f"Stopping job {job.id} ({job.name}): SIGTERM sent to its process group; SIGKILL "
        f"follows after {grace:g} s if it is still running."
    )


def _stop_without_supervisor(store: JobStore, job: Job, grace: float) -> str:
    """The supervisor is gone: end the group ourselves, if anything of it is left."""
    members = _own_members(job)
    if not members:
        if job.state is JobState.LOST:
            raise JobNotRunning(
                f"Job {job.id} is lost ({job.note or 'its supervisor is gone'}) and none of "
                "its processes is running: nothing to stop."
            )
        store.mark_ended(job.id, note="stopped; nothing of it was running")
        return f"Job {job.id} ({job.name}) had nothing left running; it is marked as stopped."
    assert job.pid is not None
    used = end_group(job.pid, grace)
    store.mark_ended(
        job.id,
        signal=used,
        note="stopped by gputop directly: its supervisor was gone",
    )
    name = "SIGTERM" if used == signal.SIGTERM else "SIGKILL"
    return f"Job {job.id} ({job.name}) stopped ({name} to its process group)."


def _own_members(job: Job) -> list[int]:
    """Live members of the job's group that are provably the job's and the user's own."""
    if job.pid is None or job.started_at is None:
        return []
    leader_ok = process_alive(job.pid, job.pid_start_time)
    members = []
    for pid in group_members(job.pid):
        try:
            process = psutil.Process(pid)
            if process.uids().real != os.getuid():
                raise GputopError(
                    f"Process {pid} in job {job.id}'s process group belongs to another "
                    "user; gputop will not signal it."
                )
            # Without the leader to vouch for the group, a member must have started after
            # the job did: a group id is only reused once the old group is empty.
            if not leader_ok and process.create_time() < job.started_at - 1.0:
                return []
        except psutil.Error:
            continue
        members.append(pid)
    return members
