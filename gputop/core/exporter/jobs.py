"""Which gputop job and which Slurm job a GPU process belongs to, for its labels.

Read by the one helper the history shares (gputop/core/process_jobs.py): an exporter run by
root labels everyone's processes, one run by a user only theirs. Each process is looked at
once: the answer is kept per (pid, start time) while it runs.
"""

from __future__ import annotations

from pathlib import Path

from gputop.core.model import GpuProcess, ProcessOrigin
from gputop.core.process_jobs import ProcessJobs, read_process_jobs


class JobLabels:
    """The jobs of the processes of the newest snapshot, each process read once."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, float | None], ProcessJobs] = {}

    def refresh(self, processes: list[GpuProcess]) -> dict[int, ProcessJobs]:
        """pid -> its jobs, for this snapshot's processes; forgets the processes gone."""
        known: dict[tuple[int, float | None], ProcessJobs] = {}
        result: dict[int, ProcessJobs] = {}
        for process in processes:
            if process.origin is not ProcessOrigin.HOST:
                continue
            key = (process.pid, process.start_time)
            jobs = known.get(key) or self._known.get(key)
            if jobs is None:
                jobs = read_process_jobs(Path("/proc") / str(process.pid))
            known[key] = jobs
            result[process.pid] = jobs
        self._known = known
        return result
