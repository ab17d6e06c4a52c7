"""``gputop jobs wait ID...``: block until those jobs end; exit with the job's status, or
124 after ``--timeout``, as timeout(1) does (gputop.core.jobs.notify says each start and end).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

from gputop.cli.arg_types import add_notify_argument, seconds
from gputop.cli.job_store import open_store
from gputop.cli.job_xids import recorded_xids
from gputop.core.jobs.model import Job
from gputop.core.jobs.notify import (
    JobEvent,
    end_note,
    exit_status,
    job_events,
    notify_argv,
    run_notify_command,
    write_terminal_notification,
)
from gputop.core.jobs.xid_marks import JobXids
from gputop.core.safe_text import clean
from gputop.core.slurm.sync import sync_slurm_jobs

POLL_S = 0.5
SLURM_POLL_S = 5.0
"""Asking squeue/sacct every half second would load the controller for nothing."""
TIMED_OUT = 124
MAX_WAIT_S = 366 * 24 * 3600.0


def add_parser(actions: argparse._SubParsersAction, job_id: Callable[[str], int]) -> None:
    wait = actions.add_parser(
        "wait",
        help="wait until jobs end; exit with the job's status (for scripts)",
        description="Block until the given jobs have ended and exit with the job's status: "
        "its exit code, 128 + the signal that ended it; with several jobs, the first one "
        "that did not exit 0. Each start and end is printed, shown as a terminal "
        "notification, and passed to --notify-command.",
    )
    wait.add_argument("job_ids", type=job_id, nargs="+", metavar="ID", help="the jobs' ids")
    wait.add_argument(
        "--timeout",
        type=seconds(0, MAX_WAIT_S),
        metavar="SECONDS",
        help="give up after this long and exit 124 (default: wait for ever)",
    )
    add_notify_argument(wait, "when a job starts or ends")
    wait.set_defaults(run=run_wait)


def run_wait(args: argparse.Namespace) -> int:
    argv = notify_argv(args.notify_command) if args.notify_command else None
    wanted = list(dict.fromkeys(args.job_ids))
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    store = open_store(create=False)
    try:
        jobs = [store.get(job_id) for job_id in wanted]
        for job in jobs:
            if not job.is_active:
                ended = f"{clean(job.status_text)}{end_note(job)}"
                print(f"Job {job.id} ({clean(job.name)}) has already ended: {ended}.")
        while any(job.is_active for job in jobs):
            if deadline is not None and time.monotonic() >= deadline:
                running = ", ".join(str(job.id) for job in jobs if job.is_active)
                print(
                    f"gputop: gave up after {args.timeout:g} s: job(s) {running} still active.",
                    file=sys.stderr,
                )
                return TIMED_OUT
            time.sleep(SLURM_POLL_S if any(job.slurm_job_id for job in jobs) else POLL_S)
            if any(job.slurm_job_id is not None and job.is_active for job in jobs):
                sync_slurm_jobs(store)  # Slurm's jobs have no supervisor (docs/slurm.md)
            now = [store.get(job.id) for job in jobs]
            for event in job_events(jobs, now, xids=_xids_of):
                _tell(event, argv)
            jobs = now
    finally:
        store.close()
    return _status(jobs)


def _xids_of(job: Job) -> JobXids:
    """The Xids the history store recorded on the job's cards while it ran."""
    return recorded_xids([job], time.time()).get(job.id) or ()


def _tell(event: JobEvent, argv: list[str] | None) -> None:
    print(event.text, flush=True)
    write_terminal_notification(event, os.environ)
    if argv is not None:
        problem = run_notify_command(argv, event)
        if problem:
            print(f"gputop: warning: {clean(problem)}", file=sys.stderr)


def _status(jobs: list[Job]) -> int:
    for job in jobs:
        status = exit_status(job)
        if status != 0:
            return status
    return 0
