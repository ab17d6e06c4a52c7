"""The options that say which Prometheus server to read and how to sign in to it, shared by
``report``, ``snapshot``, ``pick`` and the fleet dashboard (docs/fleet.md)."""

from __future__ import annotations

import argparse
import os

from gputop.core.errors import UsageError
from gputop.core.prometheus.auth import ENVIRONMENT, Server, server_for


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


def server_from_args(args: argparse.Namespace, from_environment: bool = False) -> Server | None:
    """The server ``--prometheus`` names (else, where ``from_environment``,
    ``GPUTOP_PROMETHEUS``), None when neither does."""
    url = args.prometheus
    if url is None and from_environment:
        url = os.environ.get(ENVIRONMENT) or None
    if url is None:
        if args.prometheus_auth_file is not None or args.prometheus_ca is not None:
            raise UsageError("--prometheus-auth-file and --prometheus-ca go with --prometheus.")
        return None
    return server_for(url, args.prometheus_auth_file, args.prometheus_ca)
