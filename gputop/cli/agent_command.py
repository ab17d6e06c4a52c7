"""``gputop agent``: what the lab view runs on each GPU server, over ssh (docs/lab.md).

Not for people: it writes one JSON object per line (gputop/core/remote/protocol.py) until
its stdin closes.
"""

from __future__ import annotations

import argparse
import os
import sys

from gputop.cli.arg_types import add_interval_argument
from gputop.core.sampling.source import open_backend

MIN_INTERVAL_S = 0.2


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "agent",
        parents=[parent],
        help="stream this host's GPUs and jobs as JSON lines until stdin closes (for the lab "
        "view over ssh)",
        description="Stream this host's GPUs (snapshot --json documents) and gputop jobs, one "
        "JSON object per line, every interval, until stdin closes. The lab view "
        "(--hosts) runs it on each server over ssh; see docs/lab.md.",
    )
    add_interval_argument(parser, MIN_INTERVAL_S, 1.0, "seconds between snapshots")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gputop.core.remote.agent import main_loop  # only the agent needs it (docs/speed.md)

    code = main_loop(lambda: open_backend(args.fake), args.interval)
    # The reader may have gone (ssh closed): never let the final flush print a traceback.
    try:
        sys.stdout.flush()
    except OSError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code
