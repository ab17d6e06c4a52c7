"""Which job a recorded process belongs to: a gputop job or a Slurm job, where known.

Asked once per process (the writer remembers each process it recorded). A job gputop
launched carries ``GPUTOP_JOB_ID`` in its environment, and so do the processes it starts; a
Slurm job is named by the process's cgroup or its ``SLURM_JOB_ID`` (gputop/core/slurm/
cgroup.py). ``/proc/PID/environ`` is readable only by the process's owner and root, so a
recorder run by a user attributes that user's processes, and one run by root everyone's.
The result is a label for the report (``gputop:12``, ``slurm:3456``), never a proof of
ownership: nothing is signalled on its strength.
"""

from __future__ import annotations

from pathlib import Path

from gputop.core.model import GpuProcess, ProcessOrigin
from gputop.core.numbers import MAX_ID_DIGITS, is_ascii_digits
from gputop.core.slurm.cgroup import ENVIRON_LIMIT_BYTES, job_in_cgroup, job_in_environ

GPUTOP_JOB_ENV = b"GPUTOP_JOB_ID"


def job_of_process(process: GpuProcess, proc: Path = Path("/proc")) -> str | None:
    """``gputop:ID`` or ``slurm:ID`` for a process of this machine; ``None`` when unknown."""
    if process.origin is not ProcessOrigin.HOST:
        return None
    directory = proc / str(process.pid)
    try:
        with open(directory / "environ", "rb") as handle:
            environ = handle.read(ENVIRON_LIMIT_BYTES)
    except OSError:
        environ = b""
    gputop_job = _gputop_job(environ)
    if gputop_job is not None:
        return f"gputop:{gputop_job}"
    try:
        slurm_job = job_in_cgroup((directory / "cgroup").read_text(errors="replace"))
    except OSError:
        slurm_job = None
    if slurm_job is None:
        slurm_job = job_in_environ(environ)
    return f"slurm:{slurm_job}" if slurm_job is not None else None


def _gputop_job(environ: bytes) -> int | None:
    for entry in environ.split(b"\0"):
        name, _, value = entry.partition(b"=")
        if name == GPUTOP_JOB_ENV:
            text = value.decode("ascii", "replace")
            if is_ascii_digits(text) and len(text) <= MAX_ID_DIGITS:
                return int(text)
    return None
