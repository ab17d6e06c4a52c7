"""``gputop`` with no subcommand: the live dashboard."""

from __future__ import annotations

import argparse

from gputop.core.errors import UsageError
from gputop.core.source import environment_for_jobs, open_backend

MIN_INTERVAL_S = 0.2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help=f"refresh every SECONDS (default 1.0, at least {MIN_INTERVAL_S})",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter your jobs use, for the torch check (default: python3 on PATH)",
    )
    parser.add_argument("--readonly", action="store_true", help="never offer to signal processes")


def run(args: argparse.Namespace) -> int:
    if args.interval < MIN_INTERVAL_S:
        raise UsageError(
            f"--interval {args.interval:g}: the refresh interval must be at least "
            f"{MIN_INTERVAL_S} seconds."
        )
    backend = open_backend(args.fake)
    # Textual is imported only here, so the other subcommands start fast.
    from gputop.tui.app import GputopApp

    try:
        app = GputopApp(
            backend,
            interval_s=args.interval,
            readonly=args.readonly,
            python=args.python,
            job_environ=environment_for_jobs(args.fake),
        )
        app.run()
    finally:
        backend.close()
    return 0
