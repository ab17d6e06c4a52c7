"""argparse types for numbers: finite, in range, ASCII digits; errors name the bounds.

argparse reports an ``ArgumentTypeError`` as ``gputop: error: argument --interval: ...`` and
exits 2 before anything runs, so a bad number never starts, creates or records anything.
The rules themselves live in ``gputop.core.numbers``.
"""

from __future__ import annotations

import argparse
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from gputop.core.errors import UsageError
from gputop.core.history.periods import parse_duration
from gputop.core.numbers import parse_count, parse_seconds

T = TypeVar("T")
_COMMANDS: weakref.WeakKeyDictionary[argparse.ArgumentParser, Mapping[str, Any]] = (
    weakref.WeakKeyDictionary()
)


def add_commands(parser: argparse.ArgumentParser, **options: Any) -> Any:
    """``parser.add_subparsers(**options)``, remembered so that ``commands_of`` can name
    the parser's commands without reading argparse's private attributes."""
    action = parser.add_subparsers(**options)
    _COMMANDS[parser] = action.choices
    return action


def commands_of(parser: argparse.ArgumentParser) -> Mapping[str, argparse.ArgumentParser]:
    """The commands ``add_commands`` gave ``parser`` by name (none: empty)."""
    return _COMMANDS.get(parser, {})


def argument_type(read: Callable[[str], T]) -> Callable[[str], T]:
    """``read`` as an argparse type: its ``UsageError`` said as argparse says a bad value
    (argparse puts "argument --for: " before it: the option is named once)."""

    def parse(text: str) -> T:
        try:
            return read(text)
        except UsageError as error:
            raise argparse.ArgumentTypeError(str(error).strip()) from None

    return parse


def seconds(minimum: float, maximum: float) -> Callable[[str], float]:
    """A finite number of seconds in ``[minimum, maximum]`` (``nan``, ``inf`` refused)."""
    return argument_type(lambda text: parse_seconds(text, "", minimum, maximum))


def count(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """A whole number written in ASCII digits, in ``[minimum, maximum]``."""
    return argument_type(lambda text: parse_count(text, "", minimum, maximum))


def duration(minimum_s: float = 0.0, shortest: str = "") -> Callable[[str], float]:
    """Seconds from ``90m``, ``24h``, ``7d`` (docs/history.md), at least ``minimum_s``
    (``shortest`` says it as a person would, with why)."""
    read = argument_type(lambda text: parse_duration(text, ""))

    def parse(text: str) -> float:
        value = read(text)
        if value < minimum_s:
            raise argparse.ArgumentTypeError(f"{text!r} is too short: give {shortest}.")
        return value

    return parse


def host_list(text: str) -> str:
    """``--hosts LIST`` as given, refused where it names no host: an empty value (a script's
    ``--hosts "$HOSTS"`` with HOSTS unset) would otherwise mean this machine."""
    if not any(item.strip() for item in text.split(",")):
        raise argparse.ArgumentTypeError(
            f"{text!r} names no host: needs host names or a group, e.g. --hosts gpu1,gpu2 "
            "('local' for this machine)."
        )
    return text


def add_hosts_argument(parser: argparse.ArgumentParser, lead: str = "") -> None:
    """``--hosts LIST`` (docs/lab.md); ``lead`` starts its help."""
    parser.add_argument(
        "--hosts",
        type=host_list,
        metavar="LIST",
        help=f"{lead}GPU servers over ssh: host names, ssh aliases or group names from "
        "$XDG_CONFIG_HOME/gputop/hosts.toml, comma-separated; 'local' is this machine "
        "(see docs/lab.md)",
    )


MAX_WAIT_FOR_HOSTS_S = 86400.0
wait_for_hosts = seconds(0.1, MAX_WAIT_FOR_HOSTS_S)
"""``--timeout`` with ``--hosts`` or ``--prometheus`` (the fleet caps it at an hour)."""


MAX_INTERVAL_S = 3600.0


def add_interval_argument(
    parser: argparse.ArgumentParser, minimum: float, default: float, what: str
) -> None:
    """``--interval SECONDS`` from ``minimum`` to an hour; ``what`` says what it sets."""
    parser.add_argument(
        "--interval",
        type=seconds(minimum, MAX_INTERVAL_S),
        default=default,
        metavar="SECONDS",
        help=f"{what} (default {default:g}, {minimum:g} to {MAX_INTERVAL_S:g})",
    )


def add_notify_argument(parser: argparse.ArgumentParser, when: str) -> None:
    """``--notify-command CMD``: a command run ``when`` a job starts or ends (jobs.notify,
    imported here: the dashboard's command line has no such option)."""
    from gputop.core.jobs.notify import VARIABLES_HELP

    parser.add_argument(
        "--notify-command",
        metavar="CMD",
        help=f"run CMD (split like a shell would, never run by one) {when}, with {VARIABLES_HELP}",
    )


def add_python_argument(parser: argparse.ArgumentParser, which: str) -> None:
    """``--python PATH``: the interpreter the torch probe asks (gputop.core.probes)."""
    parser.add_argument(
        "--python", metavar="PATH", help=f"{which} (default: the first python3 on PATH)"
    )


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """``--db PATH``: the history store, for ``record`` and ``report``."""
    parser.add_argument(
        "--db",
        type=Path,
        default=None,
        metavar="PATH",
        help="the history store (default: history.sqlite3 in gputop's state directory)",
    )
