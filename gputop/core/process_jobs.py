"""Which gputop job and which Slurm job a process of this machine belongs to.

A job gputop launched carries ``GPUTOP_JOB_ID`` in its environment, and so does every
process it starts; a Slurm job is named by the process's cgroup, else its ``SLURM_JOB_ID``
(gputop/core/slurm/cgroup.py). ``/proc/PID/environ`` is readable only by the owner and root,
so gputop run by root knows everyone's jobs and run by a user only theirs. The answer names
a job for a label (the exporter's, the history's); nothing is ever signalled on its strength.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gputop.core.numbers import parse_id
from gputop.core.slurm.cgroup import ENVIRON_LIMIT_BYTES, job_in_cgroup, job_in_environ

GPUTOP_JOB_ENV = b"GPUTOP_JOB_ID"
"""``gputop.core.jobs.model.JOB_ID_ENV`` as bytes, written out: importing the jobs package
would load the job store into the exporter, which never opens it."""


@dataclass(frozen=True, slots=True)
class ProcessJobs:
    gputop_job: int | None = None
    slurm_job: int | None = None


NO_JOBS = ProcessJobs()


def read_process_jobs(directory: Path) -> ProcessJobs:
    """The jobs named by one ``/proc/PID`` directory; unknown where it cannot be read."""
    try:
        with open(directory / "environ", "rb") as handle:
            environ = handle.read(ENVIRON_LIMIT_BYTES)
    except OSError:
        environ = b""
    try:
        slurm_job = job_in_cgroup((directory / "cgroup").read_text(errors="replace"))
    except OSError:
        slurm_job = None
    if slurm_job is None:
        slurm_job = job_in_environ(environ)
    return ProcessJobs(gputop_job=_gputop_job(environ), slurm_job=slurm_job)


def _gputop_job(environ: bytes) -> int | None:
    for entry in environ.split(b"\0"):
        name, _, value = entry.partition(b"=")
        if name == GPUTOP_JOB_ENV:
            return parse_id(value.decode("ascii", "replace"))
    return None
