"""Entry point: parse the command line, run a subcommand, turn errors into messages."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from gputop.cli.arg_types import add_commands, commands_of
from gputop.core import settings
from gputop.core.errors import GputopError
from gputop.core.safe_text import clean, clean_lines

INTERNAL_ERROR_EXIT = 70

COMMAND_MODULES = {
    "snapshot": "gputop.cli.snapshot",
    "map": "gputop.cli.map_command",
    "pick": "gputop.cli.pick_command",
    "run": "gputop.cli.run_command",
    "claim": "gputop.cli.claim_command",
    "claims": "gputop.cli.claims_command",
    "release": "gputop.cli.release_command",
    "jobs": "gputop.cli.jobs_command",
    "agent": "gputop.cli.agent_command",
    "signal": "gputop.cli.signal_command",
    "hosts": "gputop.cli.hosts_command",
    "record": "gputop.cli.record_command",
    "report": "gputop.cli.report_command",
    "exporter": "gputop.cli.exporter_command",
}
"""Each command and the module that adds its parser, in ``--help``'s order. ``gputop report``
imports only ``report_command`` (and what it needs), not the dashboard and the sampling of
every other command: about 100 ms less for a command that is over in a second
(``_parse``; a test checks this table against what the modules add)."""


class _NotThisWay(Exception):
    """The parser of one command could not take the command line; the whole one will."""


class _OneCommandParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _NotThisWay(message)


class _VersionAction(argparse.Action):
    """``--version``: the checkout's commit is read only when asked (gputop/core/build_info.py)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from gputop.core.build_info import version_line

        print(version_line())
        parser.exit()


SCENARIO_NAMES = "demo, v100x4, dgx-h100, mixed, mig, faulty"
"""The built-in scenarios, as --fake's help and refusal name them (gputop.core.fake's
``BUILTIN_SCENARIOS``, not imported before the first frame)."""


def _scenario(value: str) -> str:
    """``--fake``'s value: an empty one names no scenario (it meant none, or GPUTOP_FAKE's,
    without a word)."""
    if not value:
        raise argparse.ArgumentTypeError(
            f"empty: give a scenario's name ({SCENARIO_NAMES}) or a scenario file"
        )
    return value


DASHBOARD = ""
"""``only`` for the dashboard alone (no command named): no command's module is imported
before the first frame."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``only``, one that parses just that command (every other
    command's module left unimported; ``DASHBOARD``: the dashboard's options alone) and
    raises ``_NotThisWay`` where it cannot."""
    parser_class = argparse.ArgumentParser if only is None else _OneCommandParser
    common = parser_class(add_help=False)
    common.add_argument(
        "--fake",
        metavar="NAME|PATH",
        default=argparse.SUPPRESS,
        type=_scenario,
        help=f"use simulated GPUs from a built-in scenario ({SCENARIO_NAMES}) or a scenario "
        f"file; also {settings.FAKE.name}",
    )
    parser = parser_class(
        prog="gputop",
        parents=[common],
        description="A terminal dashboard for NVIDIA GPUs. Without a command, opens the live "
        "dashboard.",
        epilog=f"{settings.FAKE_TIME.name}=SECONDS freezes the clock of simulated GPUs.",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the distribution, its version and, from a git checkout, the commit",
    )
    if only is None or only == DASHBOARD:
        dashboard = importlib.import_module("gputop.cli.dashboard")
        dashboard.add_arguments(parser)
        parser.set_defaults(run=dashboard.run)
    if only == DASHBOARD:
        return parser
    commands = add_commands(parser, title="commands", metavar="COMMAND")
    for name, module in COMMAND_MODULES.items():
        if only is None or name == only:
            importlib.import_module(module).add_parser(commands, common)
    return parser


def _named_command(argv: Sequence[str]) -> str | None:
    """The command a command line names, if its first word that is not an option (nor
    ``--fake``'s value) is one."""
    words = iter(argv)
    for word in words:
        if word == "--fake":
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMAND_MODULES else None
    return None


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parsed by the named command's parser alone (no command: the dashboard's) where it
    can; anything it cannot take (a dashboard option before the command, a mistake) goes to
    the whole parser, which parses it or says what is wrong exactly as it always did."""
    command = _named_command(argv)
    if command is None and any(word in ("-h", "--help") for word in argv):
        return build_parser().parse_args(argv)  # the help names every command
    try:
        return build_parser(only=DASHBOARD if command is None else command).parse_args(argv)
    except _NotThisWay:
        pass
    whole = build_parser()
    mistyped = _unknown_option_before_command(argv)
    if mistyped is not None:  # else argparse takes its value for the command: "invalid choice"
        whole.error(f"unrecognized arguments: {mistyped}")
    parsed, unknown = whole.parse_known_args(argv)
    if unknown:  # told by the command's own parser, with its usage, not the top level's
        _parser_of(whole, argv).error(f"unrecognized arguments: {' '.join(unknown)}")
    return parsed


def _unknown_option_before_command(argv: Sequence[str]) -> str | None:
    """The first word before the command that is written as an option and is none of the
    top level's (nor the unique start of one, which argparse takes): ``--fke`` of
    ``gputop --fke demo snapshot``; None where there is none, or the dashboard's own parser
    cannot tell (a bad value: the whole parser says what is wrong)."""
    end = next((i for i, word in enumerate(argv) if word in COMMAND_MODULES), len(argv))
    before = argv[:end]
    if any(word in ("-h", "--help", "--version") for word in before):
        return None
    try:
        _parsed, unknown = build_parser(only=DASHBOARD).parse_known_args(before)
    except _NotThisWay:
        return None
    return next((word for word in unknown if word.startswith("-")), None)


def _parser_of(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the innermost command ``argv`` names (``jobs log``), else ``parser``:
    argparse reports an argument no command takes from the top, with the top's usage."""
    for word in argv:
        commands = commands_of(parser)
        if word in commands:
            parser = commands[word]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
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
        if settings.DEBUG.on():
            raise
        print(
            f"gputop: internal error: {type(error).__name__}: {clean(str(error))}. This is a bug "
            f"in gputop; {settings.DEBUG_HINT}.",
            file=sys.stderr,
        )
        return INTERNAL_ERROR_EXIT
