"""``gputop`` with no subcommand: the live dashboard."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import TYPE_CHECKING

from gputop.cli.arg_types import (
    add_hosts_argument,
    add_interval_argument,
    add_python_argument,
    wait_for_hosts,
)
from gputop.cli.prometheus_args import add_fleet_arguments, fleet_server
from gputop.core import settings
from gputop.core.errors import DashboardStopped, UsageError
from gputop.core.fleet import TIMEOUT_S as FLEET_TIMEOUT_S
from gputop.core.history.recent import dashboard_history
from gputop.core.safe_text import clean
from gputop.core.sampling.early import EarlySample
from gputop.core.sampling.source import environment_for_jobs, open_backend

if TYPE_CHECKING:
    from gputop.core.prometheus.auth import Server

FIRST_SAMPLE_WAIT_S = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_interval_argument(parser, 0.2, 1.0, "refresh every SECONDS")
    add_python_argument(parser, "the interpreter your jobs use, for the torch check")
    parser.add_argument("--readonly", action="store_true", help="never offer to signal processes")
    add_hosts_argument(parser, "the dashboard across ")
    add_fleet_arguments(parser, group_by=True)
    parser.add_argument(
        "--timeout",
        type=wait_for_hosts,
        metavar="SECONDS",
        help=f"with --prometheus: the most one read of the fleet takes, every query and byte "
        f"together (default {FLEET_TIMEOUT_S:g}, as for snapshot and pick)",
    )


def require_terminal() -> None:
    """The dashboard draws on a terminal; without one it would write escape codes forever."""
    if os.environ.get("TERM") == "dumb":
        raise UsageError(
            "The dashboard needs a terminal that understands escape codes, and TERM is "
            "'dumb': for one screen of text use gputop snapshot (or --watch to repeat it)."
        )
    for name, stream in (("input", sys.stdin), ("output", sys.stdout)):
        try:
            tty = stream is not None and stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        if not tty:
            raise UsageError(
                f"The dashboard needs a terminal, and its {name} is not one: for text use "
                "gputop snapshot (or --watch to repeat it), for scripts gputop snapshot --json."
            )


def run(args: argparse.Namespace) -> int:
    server = fleet_server(args)
    if server is None and args.timeout is not None:
        raise UsageError("--timeout goes with --prometheus: it bounds one read of the fleet.")
    require_terminal()
    if server is not None:
        return run_fleet(args, server)
    if args.hosts:
        return run_lab(args)
    # What is made from here to the first frame lives as long as the dashboard: the collector
    # would walk it again and again for nothing (3 % of start-up's instructions). It is off
    # until the dashboard settles it (gputop/tui/collector.py), or ends.
    gc.disable()
    try:
        return _run_local(args)
    finally:
        gc.enable()


def _run_local(args: argparse.Namespace) -> int:
    backend = open_backend(args.fake)
    # The first sample, read before Textual starts, is in the first frame; a driver slower
    # than FIRST_SAMPLE_WAIT_S gets the "waiting" frame first (docs/speed.md).
    first_sample = EarlySample.start(backend)
    try:
        # While the first sample is read: sparklines from a recorder's store (docs/history.md).
        history = dashboard_history(backend.nvml)
        first_sample.wait(FIRST_SAMPLE_WAIT_S)
        # Textual is imported only here, so the other subcommands start fast.
        from gputop.tui.app import GputopApp

        app = GputopApp(
            backend,
            interval_s=args.interval,
            readonly=args.readonly,
            python=args.python,
            job_environ=environment_for_jobs(args.fake),
            first_sample=first_sample,
            history=history,
            tune_collector=True,
        )
        app.run()
    finally:
        first_sample.wait()
        backend.close()
    return _finish(app)


def run_lab(args: argparse.Namespace) -> int:
    """``gputop --hosts``: the dashboard across hosts, fed by one link per host."""
    from gputop.cli.lab_common import open_lab

    lab = open_lab(args, interval_s=args.interval)
    from gputop.tui.lab.lab_app import LabApp

    with lab:
        app = LabApp(
            lab,
            [link.host for link in lab.links],
            interval_s=args.interval,
            readonly=args.readonly,
            job_environ=environment_for_jobs(args.fake),
            tune_collector=True,
        )
        app.run()
    return _finish(app)


def run_fleet(args: argparse.Namespace, server: Server) -> int:
    """``gputop --prometheus URL``: the fleet dashboard (docs/fleet.md)."""
    from gputop.cli.fleet_cli import fleet_timeout
    from gputop.core.fleet.queries import check_selector
    from gputop.core.fleet.read import FirstRead, read_fleet, read_node_figures, read_user_counts

    matchers = check_selector(args.match)
    timeout_s = fleet_timeout(args)
    # The first read runs while Textual loads (docs/fleet.md, "The fleet dashboard").
    first = FirstRead.start(
        lambda early: read_fleet(server, matchers, timeout_s, early=early, every_figure=False)
    )
    from gputop.tui.fleet.fleet_app import FleetApp

    # The table shows no temperature, power or activity: read for a node when it is opened;
    # nor the users' idle memory and GPUs: read when their view is opened.
    app = FleetApp(
        lambda: read_fleet(server, matchers, timeout_s, every_figure=False),
        server.shown,
        args.group_by,
        progressive=first.follow,
        tune_collector=True,
        node_figures=lambda node: read_node_figures(server, node, matchers, timeout_s),
        user_counts=lambda: read_user_counts(server, matchers, timeout_s),
    )
    app.run()
    return _finish(app)


def _finish(app: object) -> int:
    error = getattr(app, "fatal_error", None)
    if error is not None:  # the terminal is restored by now
        raise DashboardStopped(
            f"the dashboard stopped on an error: {type(error).__name__}: {clean(str(error))}. "
            f"This is a bug in gputop; {settings.DEBUG_HINT}."
        )
    return getattr(app, "return_code", None) or 0
