"""Entry point: parse the command line, run a subcommand, turn errors into messages."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gputop.cli import (
    agent_command,
    dashboard,
    exporter_command,
    hosts_command,
    jobs_command,
    map_command,
    pick_command,
    record_command,
    report_command,
    run_command,
    signal_command,
    snapshot,
)
from gputop.core.errors import GputopError
from gputop.core.safe_text import clean, clean_lines

INTERNAL_ERROR_EXIT = 70


class _VersionAction(argparse.Action):
    """``--version``: the checkout's commit is read only when asked (gputop/core/build_info.py)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from gputop.core.build_info import version_line

        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--fake",
        metavar="NAME|PATH",
        default=argparse.SUPPRESS,
        help="use simulated GPUs from a built-in scenario (demo, v100x4, dgx-h100, mixed, "
        "mig, faulty) or a scenario file; also GPUTOP_FAKE",
    )
    parser = argparse.ArgumentParser(
        prog="gputop",
        parents=[common],
        description="A terminal dashboard for NVIDIA GPUs. Without a command, opens the live "
        "dashboard.",
        epilog="GPUTOP_FAKE_TIME=SECONDS freezes the clock of simulated GPUs.",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the distribution, its version and, from a git checkout, the commit",
    )
    dashboard.add_arguments(parser)
    parser.set_defaults(run=dashboard.run)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    snapshot.add_parser(commands, common)
    map_command.add_parser(commands, common)
    pick_command.add_parser(commands, common)
    run_command.add_parser(commands, common)
    jobs_command.add_parser(commands, common)
    agent_command.add_parser(commands, common)
    signal_command.add_parser(commands, common)
    hosts_command.add_parser(commands, common)
    record_command.add_parser(commands, common)
    report_command.add_parser(commands, common)
    exporter_command.add_parser(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "fake"):
        args.fake = None
    try:
        return int(args.run(args))
    except GputopError as error:
        print(f"gputop: {clean_lines(str(error))}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `gputop snapshot | head`: the reader left; nothing to report.
        sys.stderr.close()
        return 0
    except Exception as error:  # the last line of defence: never a traceback for a user
        if os.environ.get("GPUTOP_DEBUG"):
            raise
        print(
            f"gputop: internal error: {type(error).__name__}: {clean(str(error))}. This is a bug "
            "in gputop; run again with GPUTOP_DEBUG=1 to see where, and please report it.",
            file=sys.stderr,
        )
        return INTERNAL_ERROR_EXIT
