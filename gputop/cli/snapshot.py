"""``gputop snapshot``: one readable screen, JSON for scripts, or a live reprint."""

from __future__ import annotations

import argparse
import shutil
import sys
from contextlib import closing

from gputop.cli.arg_types import seconds
from gputop.cli.lab_common import add_hosts_arguments
from gputop.cli.prometheus_args import add_fleet_arguments, fleet_server
from gputop.cli.snapshot_text import CLEAR_HOME, fit_rows, render_snapshot, reprint_every
from gputop.core.errors import UsageError
from gputop.core.numbers import strict_json
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.source import open_backend
from gputop.core.snapshot_json import snapshot_to_json

MIN_WATCH_S = 0.1
GPM_INTERVAL_S = 0.15
"""Below this, sleeping to the interval can bring two GPM samples within NVML's 100 ms."""
MAX_WATCH_S = 86400.0


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "snapshot",
        parents=[parent],
        help="print every GPU and its processes once (or --watch)",
        description="Print every GPU and the processes on it, like nvidia-smi or gpustat.",
    )
    parser.add_argument("--json", action="store_true", help="print schema-1 JSON instead")
    parser.add_argument(
        "--watch",
        nargs="?",
        const=1.0,
        type=seconds(MIN_WATCH_S, MAX_WATCH_S),
        metavar="SECONDS",
        help=f"reprint in place every SECONDS (default 1, {MIN_WATCH_S:g} to {MAX_WATCH_S:g}) "
        "until Ctrl-C",
    )
    add_hosts_arguments(parser)
    add_fleet_arguments(parser, group_by=True)
    parser.add_argument(
        "--stats",
        action="store_true",
        help="with --hosts: also measure and print (on stderr) the bytes per second each "
        "host sends",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    server = fleet_server(args)
    if server is not None:
        from gputop.cli.fleet_cli import run_snapshot  # the fleet's modules, only for it

        if args.watch is not None or args.stats:
            raise UsageError(
                "--prometheus prints the fleet once: --watch and --stats are not for it."
            )
        return run_snapshot(args, server, _terminal_width())
    if args.hosts:
        from gputop.cli import lab_snapshot  # the lab's modules, only for --hosts

        return lab_snapshot.run(args, _terminal_width())
    with closing(open_backend(args.fake)) as backend:
        if args.watch is None:
            _print_once(backend, args.json)
        else:
            _watch(backend, args.watch, args.json)
    return 0


def _print_once(backend: NvmlBackend, as_json: bool) -> None:
    backend.settle_activity()  # GPM figures need two samples 100 ms apart (docs/activity.md)
    snapshot = backend.sample()
    if as_json:
        print(strict_json(snapshot_to_json(snapshot), indent=2))
    else:
        print(render_snapshot(snapshot, width=_terminal_width()))


def _terminal_width() -> int | None:
    """Cut lines to the terminal; never when writing to a file or a pipe."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def _watch(backend: NvmlBackend, interval_s: float, as_json: bool) -> None:
    """Reprint until interrupted (Ctrl-C: status 130, from main); JSON mode writes one
    document per line (JSON Lines)."""
    if interval_s <= GPM_INTERVAL_S and backend.has_activity:
        print(
            f"gputop: at --watch {interval_s:g} a GPU's activity figures repeat the previous "
            "sample's where two samples come closer than NVML's 100 ms (docs/activity.md).",
            file=sys.stderr,
        )

    def frame() -> str:
        snapshot = backend.sample()
        if as_json:
            return strict_json(snapshot_to_json(snapshot))
        return CLEAR_HOME + fit_rows(render_snapshot(snapshot, _terminal_width()))

    reprint_every(interval_s, frame)
