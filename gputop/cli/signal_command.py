"""``gputop signal PID``: signal one of your own GPU processes, as the dashboard's t/T do.

The lab dashboard runs it on a server over ssh (gputop/core/remote/remote_jobs.py) after
its own confirmation dialog, so every check is made on that server by gputop there: the
process must be yours and, with ``--start-time`` or ``--start-ticks``, still the very process
the dashboard showed (gputop/core/process_control.py). ``--start-ticks`` with ``--boot-id``
(what the host's snapshot carries since they were added) proves it whatever the host's wall
clock did since; the lab passes them only to hosts whose snapshots have them, so an older
gputop, which lacks the options, is sent ``--start-time`` alone. See docs/lab.md.
"""

from __future__ import annotations

import argparse
import math
import re
import signal

from gputop.cli.arg_types import count
from gputop.core.errors import UsageError
from gputop.core.process_control import signal_own_process

SIGNALS = ("SIGTERM", "SIGKILL", "SIGINT")
MAX_START_TICKS = 2**63 - 1
_BOOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _epoch_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time in seconds") from None
    if not math.isfinite(value) or value < 0:  # nan compared as the same start, once
        raise argparse.ArgumentTypeError(f"{text!r} is not a time in seconds")
    return value


def _boot_id(text: str) -> str:
    if not _BOOT_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a boot id (a UUID)")
    return text


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "signal",
        parents=[parent],
        help="send SIGTERM or SIGKILL to one of your own processes (what the dashboard's t/T do)",
        description="Send a signal to one of your own processes, after checking that it is "
        "yours and still the same process: by --start-time, or --start-ticks with --boot-id "
        "(one of them is needed: a pid alone may name a later process).",
    )
    parser.add_argument("pid", type=count(1), help="the process id")
    parser.add_argument("--signal", choices=SIGNALS, default="SIGTERM", help="default SIGTERM")
    parser.add_argument(
        "--start-time",
        type=_epoch_seconds,
        metavar="EPOCH_S",
        help="the process's start time as gputop showed it: a later process with the same "
        "pid is never signalled",
    )
    parser.add_argument(
        "--start-ticks",
        type=count(0, MAX_START_TICKS),
        metavar="TICKS",
        help="its start in clock ticks since boot (/proc/PID/stat), with --boot-id: proves "
        "it whatever the wall clock did since (used before --start-time)",
    )
    parser.add_argument(
        "--boot-id",
        type=_boot_id,
        metavar="UUID",
        help="the boot the ticks count from (/proc/sys/kernel/random/boot_id)",
    )
    parser.add_argument("-y", "--yes", action="store_true", help="required: this never asks")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.yes:
        raise UsageError(
            f"gputop signal does not ask: add --yes to send {args.signal} to {args.pid}."
        )
    if (args.start_ticks is None) != (args.boot_id is None):
        raise UsageError("--start-ticks and --boot-id go together: ticks count from a boot.")
    if args.start_time is None and args.start_ticks is None:
        raise UsageError(
            f"gputop signal needs process {args.pid}'s start, as gputop showed it: "
            "--start-time EPOCH_S, or --start-ticks TICKS with --boot-id UUID (a pid alone "
            "may name a later process); nothing sent."
        )
    signal_own_process(
        args.pid,
        args.start_time,
        signal.Signals[args.signal],
        start_ticks=args.start_ticks,
        boot_id=args.boot_id,
    )
    print(f"Sent {args.signal} to process {args.pid}.")
    return 0
