"""What the dashboard shows of Slurm, read at most every few seconds (docs/slurm.md).

One ``squeue --json`` per read gives everything: the running jobs holding this node's
cards, the user's own jobs, and (through the job store) the state of the jobs gputop
submitted. A process is tied to its Slurm job by its cgroup or environment, where its owner
is the job's user as squeue reports it or its cgroup is Slurm's own (cgroup.py). Reading runs
in the dashboard's sampling thread, never on the UI thread; a failing Slurm is reported
once in ``error`` and the last good view is kept. What reads Slurm is imported by the first
read: where there is no Slurm the dashboard starts without it (docs/speed.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import field, replace
from typing import TYPE_CHECKING

from gputop.core.records import frozen
from gputop.core.safe_text import clean
from gputop.core.slurm.detect import slurm_commands_here
from gputop.core.units import duration

if TYPE_CHECKING:
    from gputop.core.jobs.store import JobStore
    from gputop.core.slurm.node import CardHolder
    from gputop.core.slurm.queue import SlurmJob

READ_EVERY_S = 5.0


@frozen
class SlurmView:
    node: str
    holders: Mapping[int, CardHolder] = field(default_factory=dict)
    """Physical GPU index of this node → the running Slurm job holding it."""
    user_jobs: tuple[SlurmJob, ...] = ()
    """The user's Slurm jobs that are not over, oldest first."""
    process_jobs: Mapping[int, int] = field(default_factory=dict)
    """pid → Slurm job id, for the GPU processes that run inside a Slurm job."""
    error: str | None = None
    read_at: float = 0.0
    job_users: Mapping[int, int] = field(default_factory=dict)
    """Slurm job id → the uid it runs as, for every job squeue reported."""

    def card_label(self, physical_index: int) -> str | None:
        """``slurm 123 alice train 1:02:03 left``: who holds the card, for its title."""
        holder = self.holders.get(physical_index)
        if holder is None:
            return None
        job = holder.job
        left = job.time_left_s(self.read_at)
        tail = "" if left is None else f" {duration(left)} left"
        return clean(f"slurm {job.job_id} {job.user} {job.name}{tail}")


class SlurmWatch:
    """Reads Slurm for the dashboard; ``None`` from ``for_environment`` where no Slurm."""

    def __init__(self, environ: Mapping[str, str], user: str) -> None:
        self._environ = dict(environ)
        self._user = user
        self._lock = threading.Lock()
        self._node: str | None = None
        self._last: SlurmView | None = None

    @classmethod
    def for_environment(cls, environ: Mapping[str, str], user: str) -> SlurmWatch | None:
        return cls(environ, user) if slurm_commands_here(environ) else None

    def read(
        self, store: JobStore | None, pids: Iterable[int], now: float | None = None
    ) -> SlurmView:
        """The view, read again from Slurm once ``READ_EVERY_S`` has passed."""
        now = time.time() if now is None else now
        with self._lock:
            last = self._last
            if last is None or now - last.read_at >= READ_EVERY_S:
                last = self._read(store, now)
                self._last = last
            pid_jobs = process_jobs(pids, last.job_users)
        if pid_jobs == last.process_jobs:
            return last
        return replace(last, process_jobs=pid_jobs)

    def _read(self, store: JobStore | None, now: float) -> SlurmView:
        from gputop.core.slurm.commands import SlurmError
        from gputop.core.slurm.node import card_holders, this_node
        from gputop.core.slurm.queue import read_queue
        from gputop.core.slurm.sync import sync_slurm_jobs

        if self._node is None:
            self._node = this_node(self._environ)
        problem = sync_slurm_jobs(store, self._environ) if store is not None else None
        try:
            jobs = read_queue(self._environ)
        except SlurmError as error:
            previous = self._last
            return SlurmView(
                node=self._node,
                holders=previous.holders if previous else {},
                user_jobs=previous.user_jobs if previous else (),
                error=str(error),
                read_at=now,
                job_users=previous.job_users if previous else {},
            )
        return SlurmView(
            node=self._node,
            holders=card_holders(jobs, self._node, self._environ),
            user_jobs=tuple(j for j in jobs if j.user == self._user and j.is_active),
            error=problem,
            read_at=now,
            job_users={j.job_id: j.user_id for j in jobs if j.user_id is not None},
        )


def process_jobs(pids: Iterable[int], job_users: Mapping[int, int]) -> dict[int, int]:
    """pid → Slurm job id, for those of ``pids`` proven to run inside a Slurm job
    (``job_users``: each job's uid as Slurm reports it)."""
    from gputop.core.slurm.cgroup import slurm_job_of_pid

    found: dict[int, int] = {}
    for pid in pids:
        job_id = slurm_job_of_pid(pid, job_users)
        if job_id is not None:
            found[pid] = job_id
    return found
