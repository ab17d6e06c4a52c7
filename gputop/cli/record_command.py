"""``gputop record``: sample the GPUs every few seconds into the history store, until stopped.

A foreground process for a terminal, tmux or a systemd unit (docs/history.md has both
units). SIGTERM and SIGINT write what is pending and exit 0; a second recorder on the same
store is refused, naming the pid of the first.
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
import signal
import sqlite3
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from gputop.cli.arg_types import add_db_argument, add_interval_argument, count, duration
from gputop.core import settings
from gputop.core.errors import UsageError
from gputop.core.history.jobs import job_of_process
from gputop.core.history.lock import RecorderLock
from gputop.core.history.recorder import DEFAULT_INTERVAL_S, Recorder, RecorderOptions
from gputop.core.history.retention import Retention
from gputop.core.history.store import (
    DB_NAME,
    default_history_path,
    open_for_recording,
)
from gputop.core.history.wal_bound import max_wal_bytes
from gputop.core.history.writer import HistoryWriter
from gputop.core.private_files import Sharing, default_state_dir
from gputop.core.redact import COMMAND_FORMS
from gputop.core.safe_text import clean, clean_lines
from gputop.core.sampling.nvml_backend import SamplingOptions
from gputop.core.sampling.source import open_backend


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "record",
        parents=[parent],
        help="record GPU and process history into a store, until stopped",
        description="Sample every GPU and its processes every few seconds into the history "
        "store that 'gputop report' and the dashboard read. Runs in the foreground until "
        "Ctrl-C or SIGTERM (docs/history.md has systemd units).",
    )
    add_db_argument(parser)
    add_interval_argument(parser, 0.5, DEFAULT_INTERVAL_S, "seconds between samples")
    defaults = Retention()
    for keep, default, then in (
        ("full", defaults.full_s, "every sample this long (default 48h), then one per minute"),
        (
            "minutes",
            defaults.minute_s,
            "one sample per minute this long (default 30d), then one per hour",
        ),
        ("hours", defaults.hour_s, "one sample per hour this long (default 365d), then nothing"),
    ):
        parser.add_argument(
            f"--keep-{keep}",
            type=duration(),
            default=default,
            metavar="DURATION",
            help=f"keep {then}",
        )
    parser.add_argument(
        "--readable-by",
        default=None,
        metavar="all|GROUP",
        help="a shared store (with --db): every user (all), or the members of GROUP, may "
        "read it with 'gputop report --db PATH'; only you write it (default: private)",
    )
    parser.add_argument(
        "--command-label",
        choices=COMMAND_FORMS,
        default=None,
        help="how a command line is kept: redacted (the default with --readable-by: the "
        "program, paths, flags and numbers kept, every other word and every secret-named "
        "value replaced by ***), name (the program only) or none; a private store keeps it "
        "whole unless this is given (docs/security.md)",
    )
    parser.add_argument(
        "--count",
        type=count(1),
        default=None,
        metavar="N",
        help="stop after N samples (default: until stopped)",
    )
    parser.set_defaults(run=run)


def _say(message: str) -> None:
    print(f"gputop record: {clean_lines(message)}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    retention = Retention(args.keep_full, args.keep_minutes, args.keep_hours)
    if not retention.full_s <= retention.minute_s <= retention.hour_s:
        raise UsageError(
            "Give --keep-full no longer than --keep-minutes, and --keep-minutes no longer "
            "than --keep-hours (e.g. 48h, 30d, 365d)."
        )
    max_wal_bytes()  # a bad bound is refused before anything starts
    path = args.db if args.db is not None else default_history_path()
    sharing = _sharing(args.readable_by, path)
    chosen = args.db is not None or bool(settings.HISTORY_DB.read())  # not gputop's own
    if chosen and sharing is None:
        _refuse_open_directory(Path(os.path.abspath(path)).parent)
    lock = RecorderLock(path, sharing)
    stop = threading.Event()
    # SIGTERM and SIGINT ask the loop to write what is pending and stop.
    previous = {n: signal.signal(n, lambda *_: stop.set()) for n in (signal.SIGTERM, signal.SIGINT)}
    writer: HistoryWriter | None = None
    try:
        # The recorder keeps no CUDA view: neither the driver probe nor cuda:N resolution.
        backend = open_backend(
            args.fake, options=SamplingOptions(driver_probe=False, cuda_views=False)
        )
        try:
            speed = float(getattr(backend.nvml, "speed", 1.0))  # simulated GPUs run faster
            writer = HistoryWriter(
                None,
                path,
                _say,
                job_of=job_of_process,
                connect=_opener(path, lock, sharing),
                # A shared store writes commands redacted unless told otherwise; a private
                # one keeps them whole unless told otherwise.
                command_form=args.command_label or ("redacted" if sharing is not None else None),
            )
            writer.open_store()  # a full or read-only disk: said, and tried at every batch
            options = RecorderOptions(
                interval_s=args.interval, retention=retention, speed=speed, max_samples=args.count
            )
            readers = "" if sharing is None else f", readable by {args.readable_by}"
            _say(
                f"recording every {args.interval:g} s into {path}{readers} (Ctrl-C or SIGTERM "
                "to stop)."
            )
            recorder = Recorder(backend.sample, writer, options, _say)
            taken = recorder.run(stop)
            if writer.pending:
                _say(f"{writer.pending} sample(s) could not be written before stopping.")
                return 1
            _say(f"stopped after {taken} sample(s).")
        finally:
            backend.close()
            if writer is not None and writer.connection is not None:
                writer.connection.close()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        lock.release()
    return 0


def _opener(
    path: Path, lock: RecorderLock, sharing: Sharing | None
) -> Callable[[], sqlite3.Connection]:
    """Takes the lock and opens the store; the writer calls it again at each batch while a
    full or read-only disk refuses either (docs/faults.md)."""

    def open_store() -> sqlite3.Connection:
        lock.acquire()
        notices: list[str] = []
        connection = open_for_recording(path, notices, sharing)
        for notice in notices:
            _say(notice)
        return connection

    return open_store


def _sharing(readable_by: str | None, path: Path) -> Sharing | None:
    """``--readable-by all|GROUP``: checked, and only for a store in a directory of its own
    (gputop's state directory holds the job store, which stays private)."""
    if readable_by is None:
        return None
    directory = Path(os.path.abspath(path)).parent
    if directory == Path(os.path.abspath(default_state_dir())):
        raise UsageError(
            f"--readable-by: the store is in gputop's state directory {directory}, which holds "
            "your jobs too: give --db PATH in a directory for the shared store only (e.g. "
            "--db /var/lib/gputop-history/history.sqlite3)."
        )
    if readable_by == "all":
        return Sharing()
    try:
        group = grp.getgrnam(readable_by)
    except KeyError:
        raise UsageError(
            f"--readable-by: no group named {clean(readable_by)!r}: give 'all' or a group "
            "name (e.g. --readable-by gpu-users)."
        ) from None
    return Sharing(group.gr_gid, group.gr_name)


def _refuse_open_directory(directory: Path) -> None:
    """``--db`` in a directory others may read: refused, not made private behind the user's
    back (gputop's own state directory is made private; a folder the user chose is not)."""
    try:
        info = os.stat(directory)
    except OSError:
        return  # created private when the store is opened
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISDIR(info.st_mode) and mode & 0o077:
        raise UsageError(
            f"--db: the directory {clean(str(directory))} is open to other users (mode "
            f"{mode:04o}), and the history names every user's processes and commands: "
            + _private_advice(directory, info)
        )


def _private_advice(directory: Path, info: os.stat_result) -> str:
    """What to do: ``chmod 700`` only for a directory of the user's own (for root: under
    its home), never for ``/``, ``/tmp``, ``/dev`` or another directory others use."""
    home, real = _home(), Path(os.path.realpath(directory))
    inside_home = home is not None and (real == home or home in real.parents)
    own = info.st_uid == os.geteuid() and not info.st_mode & (stat.S_ISVTX | stat.S_IWOTH)
    if own and real != Path("/") and (os.geteuid() != 0 or inside_home):
        return (
            f"give a path in a private directory (chmod 700 {clean(str(directory))}, or a new "
            "one gputop will create)."
        )
    default = default_state_dir() / DB_NAME
    return (
        f"give a path in a new directory of your own, which gputop creates private (e.g. "
        f"--db {clean(str(default))}, the default without --db). Do not make "
        f"{clean(str(directory))} private: others use it."
    )


def _home() -> Path | None:
    try:
        return Path(os.path.realpath(pwd.getpwuid(os.geteuid()).pw_dir))
    except (KeyError, OSError):
        return None
