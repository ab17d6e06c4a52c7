"""One of several processes writing the job store at once (tests/unit/test_jobs_store.py),
started by multiprocessing's spawn: a module of its own that imports only the store, so each
child starts in a fraction of the time helpers.jobs (pytest, the launcher, psutil) takes."""

from __future__ import annotations

import os
from collections.abc import Sequence

from gputop.core.jobs.model import Job
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_rows import ProcessSeen, ended, started, supervisor_seen
from gputop.core.process_control import process_start_time


def write_jobs(directory: str, worker: int, count: int, uuids: Sequence[str]) -> None:
    """Worker ``worker``'s ``count`` jobs, each through its whole life, on card
    ``worker % len(uuids)``, ending with exit code ``worker``."""
    store = JobStore.open(directory)
    try:
        for number in range(count):
            card = worker % len(uuids)
            created = store.create_job(
                Job(
                    name=f"writer-{worker}-{number}",
                    command=("python", f"w{worker}.py"),
                    command_text=f"python w{worker}.py",
                    uses_shell=False,
                    cwd="/",
                    physical_indices=(card,),
                    uuids=(uuids[card],),
                    env={},
                )
            )
            me = ProcessSeen(os.getpid(), process_start_time(os.getpid()), None)
            store.record(created.id, supervisor_seen(me))
            store.record(created.id, started(me))
            store.add_history(f"python w{worker}.py --run {number}")
            store.list_jobs()
            store.record(created.id, ended(exit_code=worker))
    finally:
        store.close()
