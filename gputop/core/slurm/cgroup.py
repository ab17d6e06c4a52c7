"""Which Slurm job a process belongs to (docs/slurm.md).

Where Slurm tracks jobs with cgroups (``ProctrackType=proctrack/cgroup``, the usual on GPU
clusters) the process's ``/proc/PID/cgroup`` path names it: ``/slurm/uid_1000/job_123/
step_0`` (cgroup v1) or ``/system.slice/slurmstepd.scope/job_123/step_0/...`` (v2). Without
cgroups (``proctrack/linuxproc``, as in the tests' one-node cluster), a process started by
Slurm still carries ``SLURM_JOB_ID`` in its environment, which Linux shows to its owner and
to root (read by sampling/process_env.py); for other users' processes that stays unknown.
"""

from __future__ import annotations

import re
from pathlib import Path

from gputop.core.numbers import parse_id
from gputop.core.sampling.process_env import read_environ

_JOB_IN_PATH = re.compile(r"/job_([0-9]{1,18})(?:/|$)")
ENVIRON_LIMIT_BYTES = 1 << 20


def job_in_cgroup(cgroup_text: str) -> int | None:
    """The Slurm job id named by a ``/proc/PID/cgroup`` text, if any."""
    for line in cgroup_text.splitlines():
        path = line.split(":", 2)[-1]
        match = _JOB_IN_PATH.search(path)
        if match:
            return int(match.group(1))
    return None


def job_in_environ(environ_bytes: bytes) -> int | None:
    """``SLURM_JOB_ID`` from a process's environment (NUL-separated), if any."""
    for entry in environ_bytes.split(b"\0"):
        name, _, value = entry.partition(b"=")
        if name in (b"SLURM_JOB_ID", b"SLURM_JOBID"):
            found = parse_id(value.decode("ascii", "replace"))
            if found is not None:
                return found
    return None


def slurm_job_of_pid(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The Slurm job of process ``pid``: by its cgroup, else by its environment."""
    try:
        found = job_in_cgroup((proc / str(pid) / "cgroup").read_text(errors="replace"))
    except OSError:
        return None
    if found is not None:
        return found
    environ = read_environ(proc / str(pid), ENVIRON_LIMIT_BYTES)
    return None if environ is None else job_in_environ(environ)
