"""``gputop jobs``: the jobs gputop launched, their logs, stopping one (asked first; without
a terminal to ask on, only with ``--yes``), and waiting for some to end (``jobs wait``: the
job's status, or 124 after ``--timeout``, as timeout(1) does).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Iterable
from typing import Any

from gputop.cli.arg_types import add_commands, add_notify_argument, seconds
from gputop.cli.job_store import close_store, open_store
from gputop.core import job_columns as columns
from gputop.core.errors import UsageError
from gputop.core.history.job_xids import recorded_job_xids
from gputop.core.history.store import HistoryError, default_history_path, open_for_reading
from gputop.core.jobs.logs import TerminalLogFilter, last_line, open_log
from gputop.core.jobs.model import MAX_GRACE_S, Job, JobState
from gputop.core.jobs.notify import (
    JobEvent,
    end_note,
    exit_status,
    job_events,
    notify_argv,
    run_notify_command,
    write_terminal_notification,
)
from gputop.core.jobs.stop import JobNotRunning, stop_job
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.xid_marks import JobXids, mark, xids_json
from gputop.core.numbers import MAX_ID, is_ascii_digits, parse_id, strict_json
from gputop.core.safe_text import clean, clean_lines
from gputop.core.slurm.submit import cancel
from gputop.core.slurm.sync import sync_slurm_jobs
from gputop.core.units import counted

FOLLOW_POLL_S = 0.25
STATE_POLL_S = 1.0
STOP_WAIT_EXTRA_S = 5.0
WAIT_POLL_S = 0.5
SLURM_POLL_S = 5.0
"""``jobs wait``: asking squeue/sacct every half second would load the controller for nothing."""
TIMED_OUT = 124
MAX_WAIT_S = 366 * 24 * 3600.0
HEADINGS = (*(column.title for column in columns.COLUMNS), columns.LAST_LINE[0])


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "jobs",
        parents=[parent],
        help="list the jobs gputop launched; show a job's log; stop a job",
        description="List the jobs launched with gputop run or the dashboard: id, name, GPUs, "
        "status, start, duration and the last line of the log.",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list instead")
    parser.set_defaults(run=run_list)
    actions = add_commands(parser, title="commands", metavar="COMMAND")

    log = actions.add_parser(
        "log",
        help="print a job's log",
        description="Print a job's log. To a terminal, only its colours and line control "
        "(newline, carriage return, tab, backspace) are passed on; every other control "
        "character is shown as an escape like \\e (see docs/security.md).",
    )
    log.add_argument("job_id", type=job_id, metavar="ID", help="the job's id")
    log.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the job ends (or Ctrl-C)"
    )
    log.add_argument(
        "--raw",
        action="store_true",
        help="copy the log's bytes as they are, escape sequences included",
    )
    log.set_defaults(run=run_log)

    stop = actions.add_parser(
        "stop",
        help="stop a job: SIGTERM to its process group, SIGKILL after a grace period",
        description="Stop a job: SIGTERM to its whole process group, then SIGKILL to what is "
        "left after the grace period. A waiting job is cancelled.",
    )
    stop.add_argument("job_id", type=job_id, metavar="ID", help="the job's id")
    stop.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    stop.add_argument(
        "--grace",
        type=seconds(0, MAX_GRACE_S),
        metavar="SECONDS",
        help="seconds between SIGTERM and SIGKILL (default: the job's, 10)",
    )
    stop.set_defaults(run=run_stop)
    _add_wait_parser(actions)


def job_id(text: str) -> int:
    """A job id as ``gputop jobs`` shows it: ASCII digits, checked by value (``parse_id``:
    SQLite's integers are 64-bit, so a larger number cannot name a job, and must not reach
    the store), whatever its leading zeros."""
    value = text.strip().lstrip("#")
    if not is_ascii_digits(value):
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not a job id (a number in digits 0-9, as in gputop jobs)"
        )
    number = parse_id(value)
    if number is None:
        raise argparse.ArgumentTypeError(
            f"there is no job {_shown(value)}: job ids are at most {MAX_ID} "
            "(gputop jobs lists them)"
        )
    return number


def _shown(text: str) -> str:
    """``text`` for a message: quoted, and cut where a person would stop reading."""
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "…"


# --- gputop jobs -----------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    store = open_store(create=False)
    try:
        _sync_slurm(store)
        jobs = store.list_jobs()
    finally:
        close_store(store)
    xids = recorded_xids(jobs, time.time())
    if args.json:
        records = []
        for job in jobs:
            record = job.to_json()
            record["last_log_line"] = last_line(job.log_path)
            record["xids"] = xids_json(xids.get(job.id))
            records.append(record)
        print(strict_json(records, indent=2))
        return 0
    if not jobs:
        print("No jobs yet. Launch one with: gputop run --gpus 0 -- python train.py")
        return 0
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    print(render_table(jobs, time.time(), width, xids))
    return 0


def render_table(
    jobs: list[Job],
    now: float,
    width: int | None = None,
    xids: dict[int, JobXids | None] | None = None,
) -> str:
    """The jobs table; with ``width``, the last column is cut to fit the terminal. A job
    whose cards had an Xid while it ran has its mark after its status (``✖ Xid 79``)."""
    status = columns.COLUMNS.index(columns.STATUS)
    rows = []
    for job in jobs:
        texts = [clean(text) for text in columns.texts(job, now, True)]
        texts[status] = f"{texts[status]} {mark((xids or {}).get(job.id) or ())}".rstrip()
        rows.append((*texts, clean(_detail(job))))
    last = len(HEADINGS) - 1
    widths = [max(len(HEADINGS[i]), *(len(row[i]) for row in rows)) for i in range(last)]
    lines = []
    for row in [HEADINGS, *rows]:
        cells = [
            row[i].rjust(widths[i]) if column.right else row[i].ljust(widths[i])
            for i, column in enumerate(columns.COLUMNS)
        ]
        line = "  ".join([*cells, row[last]]).rstrip()
        if width is not None and len(line) > width:
            line = line[: max(width - 1, 0)] + "…"
        lines.append(line)
    return "\n".join(lines)


def recorded_xids(jobs: Iterable[Job], now: float) -> dict[int, JobXids | None]:
    """Job id -> the Xids its cards had while it ran, from the history store where one is
    readable (docs/health.md); every job ``None`` ("cannot know", never "none") where no
    store can be read (none, one too old or unreadable)."""
    jobs = list(jobs)
    unknown: dict[int, JobXids | None] = {job.id: None for job in jobs}
    path = default_history_path()
    if not jobs or not os.path.lexists(path):
        return unknown
    try:
        connection = open_for_reading(path)
    except HistoryError:
        return unknown  # the report says why; a jobs list shows no mark it cannot know
    try:
        return {job.id: recorded_job_xids(connection, job, now) for job in jobs}
    except sqlite3.Error:
        return unknown
    finally:
        connection.close()


def _detail(job: Job) -> str:
    """Why a job waits or was lost; otherwise the last line it printed."""
    if job.state is JobState.WAITING:
        return job.waiting_reason
    if job.state is JobState.LOST and job.note:
        return job.note
    line = last_line(job.log_path) or ""
    if job.log_cut:
        return f"(log cut) {line}"
    return line


# --- gputop jobs log -------------------------------------------------------------------------


def run_log(args: argparse.Namespace) -> int:
    store = open_store(create=False)
    try:
        job = store.get(args.job_id)
        if job.slurm_job_id is not None and not os.path.isfile(job.log_path):
            started = _wait_for_slurm_output(store, job, args.follow)
            if started is None:
                return 0
            job = started
        try:
            with open_log(job.log_path) as log:
                terminal = not args.raw and _is_tty(sys.stdout)
                copy = _Copier(log, TerminalLogFilter() if terminal else None)
                copy()
                if args.follow:  # until the job ends, or Ctrl-C: status 130, from main
                    _follow(store, job, copy)
                copy.finish()
        except OSError as error:
            raise UsageError(
                f"Cannot read job {job.id}'s log {clean(job.log_path)}: {error.strerror or error}."
            ) from None
    finally:
        close_store(store)
    return 0


def _is_tty(stream: Any) -> bool:
    """``stream`` is a terminal (False for a closed one, or None where there is no stream)."""
    try:
        return stream is not None and bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _Copier:
    """Copies what is new in the log to stdout: as bytes, or through a terminal filter."""

    def __init__(self, log: Any, terminal: TerminalLogFilter | None) -> None:
        self._log = log
        self._terminal = terminal

    def __call__(self) -> bool:
        """Copy what is new; True if there was anything."""
        copied = False
        while chunk := self._log.read(65536):
            if self._terminal is None:
                sys.stdout.buffer.write(chunk)
            else:
                sys.stdout.buffer.write(self._terminal.feed(chunk).encode("utf-8", "replace"))
            copied = True
        sys.stdout.buffer.flush()
        return copied

    def finish(self) -> None:
        if self._terminal is not None:
            sys.stdout.buffer.write(self._terminal.finish().encode("utf-8", "replace"))
            sys.stdout.buffer.flush()


def _follow(store: JobStore, job: Job, copy: _Copier) -> None:
    """Print what the job writes until it has ended (then what it wrote last)."""
    checked = time.monotonic()
    while job.is_active:
        if not copy():
            time.sleep(FOLLOW_POLL_S)
        if time.monotonic() - checked >= STATE_POLL_S:
            job = _refreshed(store, job)
            checked = time.monotonic()
    copy()


def _sync_slurm(store: JobStore) -> None:
    """Copy Slurm's word on its jobs into the store (docs/slurm.md); say when it cannot."""
    problem = sync_slurm_jobs(store)
    if problem:
        print(f"gputop: Slurm did not answer: {clean(problem)}", file=sys.stderr)


def _refreshed(store: JobStore, job: Job) -> Job:
    if job.slurm_job_id is not None:
        sync_slurm_jobs(store)
    return store.get(job.id)


def _wait_for_slurm_output(store: JobStore, job: Job, follow: bool) -> Job | None:
    """A Slurm job writes no output file before it starts: say so, or wait for it."""
    while True:
        job = _refreshed(store, job)
        if os.path.isfile(job.log_path):
            return job
        if not follow or not job.is_active:
            print(f"Job {job.id} has no output yet ({clean(job.status_text)}).")
            return None
        time.sleep(STATE_POLL_S)


# --- gputop jobs stop ------------------------------------------------------------------------


def run_stop(args: argparse.Namespace) -> int:
    store = open_store(create=False)
    try:
        job = store.get(args.job_id)
        if job.state is JobState.ENDED:
            raise JobNotRunning(f"Job {job.id} has already ended ({job.status_text}).")
        if not args.yes and not _confirmed(job):
            print("Not stopped.")
            return 1
        grace = job.grace_s if args.grace is None else args.grace
        wait_s = grace + STOP_WAIT_EXTRA_S
        said = stop_job(store, job.id, args.grace, wait_s=wait_s, cancel_in_slurm=cancel)
        print(clean_lines(said))
    finally:
        close_store(store)
    return 0


def stop_question(job: Job) -> str:
    """``Stop job 3 (train.py) on GPUs 0,2, pid 1234? [y/N] ``."""
    if job.slurm_job_id is not None:
        return (
            f"Cancel job {job.id} ({clean(job.name)}), Slurm job {job.slurm_job_id} "
            f"({clean(job.status_text)}), with scancel? [y/N] "
        )
    count = len(job.physical_indices)
    cards = f"GPU{'s' if count != 1 else ''} {job.gpus_text}"
    if job.pid is not None and job.state is JobState.RUNNING:
        where = f"on {cards}, pid {job.pid}"
    elif job.state is JobState.WAITING:
        wanted = f"any {counted(job.wait_count, 'GPU')}" if job.wait_count else cards
        where = f"waiting for {cards}" if count else f"waiting for {wanted}"
    else:
        where = f"on {cards} ({job.status_text})"
    return f"Stop job {job.id} ({clean(job.name)}) {where}? [y/N] "


def _confirmed(job: Job) -> bool:
    if not _is_tty(sys.stdin):
        raise UsageError(
            f"Not stopping job {job.id} without a confirmation, and there is no terminal to "
            "ask on: add --yes to stop it."
        )
    try:
        answer = input(stop_question(job))
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


# --- gputop jobs wait ------------------------------------------------------------------------


def _add_wait_parser(actions: argparse._SubParsersAction) -> None:
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
    with open_store(create=False) as store:
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
            time.sleep(SLURM_POLL_S if any(job.slurm_job_id for job in jobs) else WAIT_POLL_S)
            if any(job.slurm_job_id is not None and job.is_active for job in jobs):
                sync_slurm_jobs(store)  # Slurm's jobs have no supervisor (docs/slurm.md)
            now = [store.get(job.id) for job in jobs]
            for event in job_events(jobs, now, xids=_xids_of):
                _tell(event, argv)
            jobs = now
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
