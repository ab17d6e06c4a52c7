"""The options that say which Prometheus server to read and how to sign in to it, shared by
``report``, ``snapshot``, ``pick`` and the fleet dashboard (docs/fleet.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gputop.core import settings
from gputop.core.errors import UsageError

if TYPE_CHECKING:
    from gputop.core.prometheus.auth import Server

ENVIRONMENT = settings.PROMETHEUS.name


def add_credentials_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prometheus-auth-file",
        metavar="FILE",
        help="with --prometheus: sign in with the one line of FILE, 'user:password' (basic "
        "auth) or 'bearer TOKEN'; FILE must be readable by you alone (chmod 600)",
    )
    parser.add_argument(
        "--prometheus-ca",
        metavar="FILE",
        help="with an https:// --prometheus: trust the CA certificates in FILE",
    )


def server_from_args(args: argparse.Namespace, named: str = "--prometheus ") -> Server | None:
    """The server ``--prometheus`` names, None without it; ``named``: where the URL was given."""
    url = args.prometheus
    if url is None:
        if args.prometheus_auth_file is not None or args.prometheus_ca is not None:
            raise UsageError("--prometheus-auth-file and --prometheus-ca go with --prometheus.")
        return None
    from gputop.core.prometheus.auth import server_for  # not on the way to the local dashboard

    return server_for(url, args.prometheus_auth_file, args.prometheus_ca, named)


def add_fleet_arguments(parser: argparse.ArgumentParser, group_by: bool = False) -> None:
    """``--prometheus [URL]`` and what goes with it, for ``snapshot`` and ``pick``."""
    parser.add_argument(
        "--prometheus",
        nargs="?",
        const="",
        metavar="URL",
        help=f"the fleet: every node this Prometheus (or Thanos, VictoriaMetrics) scrapes "
        f"with dcgm-exporter or 'gputop exporter'; without URL, ${ENVIRONMENT} "
        "(docs/fleet.md)",
    )
    add_credentials_arguments(parser)
    parser.add_argument(
        "--match",
        metavar="SELECTOR",
        help="with --prometheus: only the nodes whose series match these label matchers, "
        "e.g. '{cluster=\"a\"}'",
    )
    if group_by:
        parser.add_argument(
            "--group-by",
            metavar="LABEL",
            help="with --prometheus: group the nodes by this label of their targets",
        )


def fleet_server(args: argparse.Namespace) -> Server | None:
    """The ``--prometheus`` server of ``snapshot`` or ``pick``, None without the option."""
    if args.prometheus is None:
        for option in ("match", "group_by"):
            if getattr(args, option, None) is not None:
                raise UsageError(f"--{option.replace('_', '-')} goes with --prometheus.")
        return server_from_args(args)
    group_by = getattr(args, "group_by", None)
    if group_by is not None and not (group_by.isascii() and group_by.replace("_", "a").isalnum()):
        raise UsageError(f"--group-by {group_by[:80]!r}: give a label name, e.g. cluster.")
    if getattr(args, "hosts", None):
        raise UsageError("--prometheus reads the fleet from Prometheus; --hosts asks over ssh.")
    if getattr(args, "fake", None):
        raise UsageError("--prometheus reads the fleet from Prometheus, not a simulation.")
    if args.prometheus == "":
        url = settings.PROMETHEUS.read().strip()
        if not url:
            raise UsageError(
                f"--prometheus without a URL reads ${ENVIRONMENT}, which is not set: give "
                "--prometheus http://prometheus:9090, or set it."
            )
        args.prometheus = url
        return server_from_args(args, named=f"{ENVIRONMENT}=")  # named so in an error
    return server_from_args(args)
