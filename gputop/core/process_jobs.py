"""Which gputop job and which Slurm job a process of this machine belongs to.

A job gputop launched carries its id (``settings.JOB_ID``) in its environment, and so does
every process it starts; a Slurm job is named by the process's cgroup, else its
``SLURM_JOB_ID``, taken only where proven (gputop/core/slurm/cgroup.py: Slurm's own cgroup,
or an owner who is the job's user in ``job_users``; the exporter and the recorder do not
ask Slurm, so for them only Slurm's own cgroups count). A process's environment is readable
only by its owner and root (sampling/process_env.py), so gputop run by root knows everyone's
jobs and run by a user only theirs. The answer names a job for a label (the exporter's, the
history's); nothing is ever signalled on its strength.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gputop.core import settings
from gputop.core.numbers import parse_id
from gputop.core.records import frozen
from gputop.core.sampling.process_env import environ_value, read_environ
from gputop.core.slurm.cgroup import ENVIRON_LIMIT_BYTES, attributed_job


@frozen
class ProcessJobs:
    gputop_job: int | None = None
    slurm_job: int | None = None


NO_JOBS = ProcessJobs()


def read_process_jobs(directory: Path, job_users: Mapping[int, int] | None = None) -> ProcessJobs:
    """The jobs named by one ``/proc/PID`` directory; unknown where it cannot be read, and
    no Slurm job where none is proven (``job_users``: Slurm job id → its uid, if known)."""
    environ = read_environ(directory, ENVIRON_LIMIT_BYTES) or b""
    slurm_job = attributed_job(directory, job_users or {}, environ)
    gputop_job = environ_value(environ, settings.JOB_ID.name)
    return ProcessJobs(None if gputop_job is None else parse_id(gputop_job), slurm_job)
