"""``gputop snapshot --hosts ...``: every host's GPUs once, each under its name and status
(``--json``: one aggregate document, its fields in docs/lab.md).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import replace

from gputop.cli.agent_command import MIN_INTERVAL_S
from gputop.cli.lab_common import host_label, hosts_timeout, open_lab, status_json
from gputop.cli.snapshot_text import CLEAR_HOME, fit_rows, render_snapshot, reprint_every
from gputop.core.errors import UsageError
from gputop.core.numbers import strict_json
from gputop.core.remote.lab import settled
from gputop.core.remote.status import HostStatus, LinkState
from gputop.core.safe_text import clean
from gputop.core.snapshot_json import SCHEMA_VERSION

STATS_SNAPSHOTS = 5
INTERRUPTED = 130
"""Ctrl-C's status (128 + SIGINT), as every gputop command answers it (main)."""


def run(args: argparse.Namespace, width: int | None) -> int:
    timeout = hosts_timeout(args)
    if not timeout > 0:
        raise UsageError(f"--timeout {timeout}: give a positive number of seconds.")
    if args.watch is not None:
        if args.watch < MIN_INTERVAL_S:
            raise UsageError(
                f"--watch {args.watch}: with --hosts the interval must be at least "
                f"{MIN_INTERVAL_S} seconds (what the remote agent accepts)."
            )
        return _watch(args, width)
    with open_lab(args) as lab:
        lab.wait_all(settled, timeout)
        if args.stats:
            # A steady rate needs several snapshots per host; hosts that fail stop counting.
            lab.wait_all(_counted_enough, timeout + STATS_SNAPSHOTS)
        statuses = lab.statuses()
    if args.json:
        print(lab_json(statuses, indent=2))
    else:
        print("\n\n".join(render_host(status, width) for status in statuses))
    if args.stats:
        for status in statuses:
            print(stats_line(status), file=sys.stderr)
    return 0 if any(s.snapshot is not None for s in statuses) else 1


def _watch(args: argparse.Namespace, width: int | None) -> int:
    """Reprint every host each interval until Ctrl-C; hosts stream at that interval."""
    with open_lab(args, interval_s=args.watch) as lab:

        def frame() -> str:
            statuses = lab.statuses()
            if args.json:
                return lab_json(statuses)
            hosts = "\n\n".join(render_host(s, width, once=False) for s in statuses)
            return CLEAR_HOME + fit_rows(hosts)

        with contextlib.suppress(KeyboardInterrupt):  # reprint_every returns only by Ctrl-C
            reprint_every(args.watch, frame)
    return INTERRUPTED


def lab_json(statuses: list[HostStatus], indent: int | None = None) -> str:
    """The aggregate ``--json`` document: strict JSON, whatever a host sent."""
    hosts = [status_json(status) for status in statuses]
    document = {"schema": SCHEMA_VERSION, "kind": "lab", "hosts": hosts}
    return strict_json(document, indent=indent)


def _counted_enough(status: HostStatus) -> bool:
    return status.snapshots_received >= STATS_SNAPSHOTS or status.state is LinkState.UNREACHABLE


def render_host(status: HostStatus, width: int | None, once: bool = True) -> str:
    if once:  # one look: no retry countdown, the command ends before the next try
        status = replace(status, retry_in_s=None)
    header = f"== {host_label(status)}: {clean(status.describe())} =="
    if status.snapshot is None:
        return header
    return header + "\n" + render_snapshot(status.snapshot, width=width)


def stats_line(status: HostStatus) -> str:
    rate = "n/a" if status.bytes_per_s is None else f"{status.bytes_per_s:.0f} B/s"
    return (
        f"gputop: stats: {host_label(status)}: {rate} on the wire "
        f"({status.bytes_received} bytes, {status.snapshots_received} snapshots)"
    )
