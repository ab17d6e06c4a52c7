"""Which job a recorded process belongs to: a gputop job or a Slurm job, where known.

Asked once per process (the writer remembers each process it recorded), through the one
helper the exporter shares (gputop/core/process_jobs.py): a recorder run by a user
attributes that user's processes, and one run by root everyone's. The result is a label for
the report (``gputop:12``, ``slurm:3456``), never a proof of ownership: nothing is
signalled on its strength.
"""

from __future__ import annotations

from pathlib import Path

from gputop.core.model import GpuProcess, ProcessOrigin
from gputop.core.process_jobs import read_process_jobs


def job_of_process(process: GpuProcess, proc: Path = Path("/proc")) -> str | None:
    """``gputop:ID`` or ``slurm:ID`` for a process of this machine; ``None`` when unknown."""
    if process.origin is not ProcessOrigin.HOST:
        return None
    jobs = read_process_jobs(proc / str(process.pid))
    if jobs.gputop_job is not None:
        return f"gputop:{jobs.gputop_job}"
    return f"slurm:{jobs.slurm_job}" if jobs.slurm_job is not None else None
