"""``gputop exporter``: serve this machine's GPUs as Prometheus metrics (docs/exporter.md);
each scrape is answered from the newest sample.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from contextlib import closing

from gputop.cli.arg_types import add_interval_argument, count
from gputop.core.errors import UsageError
from gputop.core.exporter.labels import COMMAND_LABELS
from gputop.core.exporter.listen import DEFAULT_LISTEN, ListenAddress, parse_listen
from gputop.core.exporter.processes import DEFAULT_TOP, MAX_TOP
from gputop.core.safe_text import clean
from gputop.core.sampling.source import open_backend


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "exporter",
        parents=[parent],
        help="serve this machine's GPUs, processes, users and jobs as Prometheus metrics",
        description="Serve /metrics for Prometheus: dcgm-exporter's GPU metrics and labels, "
        "and gputop's own (processes with their users and jobs, memory held idle, per-user "
        "totals, lost GPUs). Listens on this machine only unless --listen says otherwise; "
        "see docs/exporter.md.",
    )
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"address to serve on (default {DEFAULT_LISTEN}: this machine only; port 0 "
        "picks a free one)",
    )
    add_interval_argument(parser, 0.2, 15.0, "seconds between samples of the GPUs")
    parser.add_argument(
        "--top",
        type=count(1, MAX_TOP),
        default=DEFAULT_TOP,
        metavar="N",
        help=f"processes per GPU exported one by one, the largest first (default {DEFAULT_TOP});"
        " the rest are summed",
    )
    parser.add_argument(
        "--command-label",
        choices=COMMAND_LABELS,
        default="redacted",
        help="how a process's command line is labelled: redacted (default: the program, "
        "paths, flags and numbers shown, every other word and every secret-named value "
        "replaced by ***), name (the program only) or none; every local user can read the "
        "metrics (docs/security.md)",
    )
    parser.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate")
    parser.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    address = parse_listen(args.listen)
    if (args.tls_cert is None) != (args.tls_key is None):
        raise UsageError("--tls-cert and --tls-key go together: give both, or neither.")
    from gputop.core.exporter.collector import SnapshotCollector, sample_once, sample_until
    from gputop.core.exporter.server import serve, tls_context

    # Read before the GPUs are: a file named wrong is said at once.
    tls = None if args.tls_cert is None else tls_context(args.tls_cert, args.tls_key)

    with closing(open_backend(args.fake)) as backend:
        collector = SnapshotCollector(top=args.top, command=args.command_label)
        stop = threading.Event()
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda *_: stop.set())
        sampled_at = time.monotonic()
        problem = sample_once(backend.sample, collector)  # the first scrape has a sample
        if problem is not None:
            _say(problem)
        with serve(collector, address, tls) as port:
            scheme = "http" if tls is None else "https"
            _announce(address, address.url(port, scheme))
            sample_until(
                backend.sample, collector, args.interval, stop, _say, sampled_at=sampled_at
            )
    return 0


def _announce(address: ListenAddress, url: str) -> None:
    print(f"gputop exporter: serving {url}", file=sys.stderr, flush=True)
    if not address.is_loopback:
        print(
            "gputop exporter: this address is reachable from other machines; the metrics name "
            "users and commands (docs/exporter.md shows an SSH tunnel or a reverse proxy).",
            file=sys.stderr,
            flush=True,
        )


def _say(message: str) -> None:
    print(f"gputop exporter: {clean(message)}", file=sys.stderr, flush=True)
