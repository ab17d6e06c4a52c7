"""What ``snapshot``, ``pick`` and ``run`` share when given ``--hosts`` (docs/lab.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from gputop.cli.arg_types import add_hosts_argument, wait_for_hosts
from gputop.core.fleet import TIMEOUT_S as FLEET_TIMEOUT_S
from gputop.core.safe_text import clean
from gputop.core.sampling.source import open_backend

if TYPE_CHECKING:  # the lab's modules load when a command is given --hosts (docs/speed.md)
    from gputop.core.remote.lab import Lab
    from gputop.core.remote.status import HostStatus

DEFAULT_TIMEOUT_S = 15.0
"""``--timeout`` with ``--hosts``; with ``--prometheus`` it is the fleet's own default."""


def add_hosts_arguments(parser: argparse.ArgumentParser) -> None:
    add_hosts_argument(parser)
    parser.add_argument(
        "--timeout",
        type=wait_for_hosts,
        metavar="SECONDS",
        help=f"with --hosts: how long to wait for the hosts to answer (default "
        f"{DEFAULT_TIMEOUT_S:g}); with --prometheus: the most one read of the fleet takes, "
        f"every query and byte together (default {FLEET_TIMEOUT_S:g})",
    )


def hosts_timeout(args: argparse.Namespace) -> float:
    """``--timeout`` for the hosts: as given, else ``DEFAULT_TIMEOUT_S``."""
    return DEFAULT_TIMEOUT_S if args.timeout is None else float(args.timeout)


def open_lab(args: argparse.Namespace, interval_s: float = 1.0) -> Lab:
    """The hosts of ``--hosts``, groups expanded; not started yet (use ``with``)."""
    from gputop.core.remote.hosts import config_path, load_groups, resolve_hosts
    from gputop.core.remote.lab import Lab

    entries = resolve_hosts(args.hosts, load_groups(config_path()))
    return Lab(entries, interval_s, lambda: open_backend(args.fake))


def host_label(status: HostStatus) -> str:
    """The host's name, made safe to print (names come from the command line and files)."""
    return clean(status.host)


def status_json(status: HostStatus) -> dict[str, Any]:
    from gputop.core.snapshot_json import snapshot_to_json

    failure = status.failure
    return {
        "host": status.host,
        "state": status.state.value,
        "status": status.describe(),
        "mode": status.mode.value if status.mode else None,
        "user": status.user,
        "gputop_version": status.agent_version,
        "failure": None
        if failure is None
        else {"kind": failure.kind, "reason": failure.reason, "advice": failure.advice},
        "stale_for_s": status.stale_for_s,
        "snapshot": snapshot_to_json(status.snapshot) if status.snapshot else None,
        "jobs": status.jobs,
        "jobs_error": status.jobs_error,
        "wire": {
            "bytes_received": status.bytes_received,
            "bytes_per_s": status.bytes_per_s,
            "snapshots_received": status.snapshots_received,
        },
    }
