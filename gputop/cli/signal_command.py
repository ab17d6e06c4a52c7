"""``gputop signal PID``: signal one of your own GPU processes, as the dashboard's t/T do.

The lab dashboard runs it on a server over ssh (gputop/core/remote/remote_jobs.py) after
its own confirmation dialog, so every check is made on that server by gputop there: the
process must be yours and, with ``--start-time``, still the very process the dashboard
showed (gputop/core/process_control.py). See docs/lab.md.
"""

from __future__ import annotations

import argparse
import signal

from gputop.cli.arg_types import count
from gputop.core.errors import UsageError
from gputop.core.process_control import signal_own_process

SIGNALS = ("SIGTERM", "SIGKILL", "SIGINT")


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "signal",
        parents=[parent],
        help="send SIGTERM or SIGKILL to one of your own processes (what the dashboard's t/T do)",
        description="Send a signal to one of your own processes, after checking that it is "
        "yours and (with --start-time) still the same process.",
    )
    parser.add_argument("pid", type=count(1), help="the process id")
    parser.add_argument("--signal", choices=SIGNALS, default="SIGTERM", help="default SIGTERM")
    parser.add_argument(
        "--start-time",
        type=float,
        metavar="EPOCH_S",
        help="the process's start time as gputop showed it: a later process with the same "
        "pid is never signalled",
    )
    parser.add_argument("-y", "--yes", action="store_true", help="required: this never asks")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.yes:
        raise UsageError(
            f"gputop signal does not ask: add --yes to send {args.signal} to {args.pid}."
        )
    signal_own_process(args.pid, args.start_time, signal.Signals[args.signal])
    print(f"Sent {args.signal} to process {args.pid}.")
    return 0
