"""``gputop`` with no subcommand: the live dashboard."""

from __future__ import annotations

import argparse

from gputop.cli.arg_types import seconds
from gputop.core.source import environment_for_jobs, open_backend

MIN_INTERVAL_S = 0.2
MAX_INTERVAL_S = 3600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interval",
        type=seconds(MIN_INTERVAL_S, MAX_INTERVAL_S),
        default=1.0,
        metavar="SECONDS",
        help=f"refresh every SECONDS (default 1.0, {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g})",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter your jobs use, for the torch check (default: python3 on PATH)",
    )
    parser.add_argument("--readonly", action="store_true", help="never offer to signal processes")


def run(args: argparse.Namespace) -> int:
    backend = open_backend(args.fake)
    # Textual is imported only here, so the other subcommands start fast.
    from gputop.tui.app import GputopApp
    from gputop.tui.screen_diff import diffing_driver

    try:
        app = GputopApp(
            backend,
            interval_s=args.interval,
            readonly=args.readonly,
            python=args.python,
            job_environ=environment_for_jobs(args.fake),
        )
        app.driver_class = diffing_driver(app.driver_class)
        app.run()
    finally:
        backend.close()
    return 0
