"""``gputop report``: who used the cards and who held them idle, from the history store, read
read-only so that a running recorder is never blocked (docs/history.md).
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gputop.cli.arg_types import add_db_argument, duration, seconds
from gputop.cli.prometheus_args import add_credentials_arguments, server_from_args
from gputop.cli.report_plot import plot_columns, render_plot
from gputop.core.errors import UsageError
from gputop.core.fleet.fleet_text import flooded
from gputop.core.history.claim_spans import ClaimedTime, claimed_time
from gputop.core.history.periods import LATEST_S, parse_moment
from gputop.core.history.report import (
    DEFAULT_IDLE_MIN_S,
    ROW_FIELDS,
    ReportBy,
    ReportQuery,
    ReportRow,
    build_report,
    report_to_json,
)
from gputop.core.history.report import iso_text as _iso
from gputop.core.history.series import gpu_series, plot_columns_for, recorded_span
from gputop.core.history.spans import IDLE_SM_PERCENT, MIN_IDLE_RUN_S
from gputop.core.history.store import HistoryError, default_history_path, open_for_reading
from gputop.core.numbers import strict_json
from gputop.core.prometheus.client import MAX_TIMEOUT_S, TIMEOUT_S, Budget
from gputop.core.safe_text import clean
from gputop.core.units import NA, human_bytes
from gputop.core.units import duration as elapsed

COLUMNS_HELP = (
    "The columns, for each holder over the window: GPU TIME: the seconds it held a card, "
    "each card counted once however many of its processes held it, summed over cards. "
    "IDLE HELD: the seconds of stretches of --idle-min or more in which it held memory with "
    f"SM under {IDLE_SM_PERCENT:g} %. "
    "MEAN MEM: the memory it held, time-weighted while it held a card. "
    "PEAK MEM: the most it held on one card at once. MEAN SM: its processes' SM % added up, "
    "time-weighted while it held a card: NVML's per-process figure, the share of the time "
    "a kernel of theirs ran, whatever number of SMs it kept busy; with --by gpu all of a "
    "card's processes, so at most the card's utilisation. SM ACTIVE: how much of the SMs "
    "of the cards it held worked (GPM, Hopper and newer; N/A elsewhere): kernels that run "
    "all the time on a few SMs show a high MEAN SM and a low SM ACTIVE. TENSOR: how much "
    "of the time the tensor cores of those cards worked (GPM). See docs/history.md."
)


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "report",
        parents=[parent],
        help="who used the GPUs, and who held them idle, from the recorded history",
        description="Sum up what 'gputop record' recorded: GPU time, memory and SM use per "
        "user, GPU, job or process, and who held a card idle (memory held while SM stayed "
        f"under {IDLE_SM_PERCENT:g} % for at least --idle-min). Idle holders come first.",
        epilog=COLUMNS_HELP,
    )
    add_db_argument(parser)
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="answer from this Prometheus server (every host it scrapes with 'gputop "
        "exporter') instead of the local store; see docs/exporter.md",
    )
    add_credentials_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=seconds(1, MAX_TIMEOUT_S),
        default=None,
        metavar="SECONDS",
        help=f"with --prometheus: the most seconds the whole report may take, every query "
        f"and every byte of the answers together, not each read (default {TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--since",
        default="24h",
        metavar="WHEN",
        help="start of the window: a duration ago (90m, 24h, 7d) or an ISO date/time (default 24h)",
    )
    parser.add_argument(
        "--until", default=None, metavar="WHEN", help="end of the window (default: now)"
    )
    parser.add_argument(
        "--by",
        choices=[by.value for by in ReportBy],
        default=ReportBy.USER.value,
        help="one row per user (default), GPU, job or process",
    )
    parser.add_argument(
        "--idle-min",
        type=duration(MIN_IDLE_RUN_S, "1m or more (shorter idle stretches are not recorded)"),
        default=DEFAULT_IDLE_MIN_S,
        metavar="DURATION",
        help="the shortest idle stretch that counts as holding a card idle (default 30m)",
    )
    parser.add_argument(
        "--health",
        action="store_true",
        help="list the window's Xids (with the processes and jobs on the card then) and the "
        "GPUs whose health counters rose (ECC errors, retired pages, remapped rows, PCIe "
        "replays, NVLink CRC errors); with --json as JSON. See docs/health.md",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON")
    output.add_argument("--csv", action="store_true", help="print CSV")
    output.add_argument(
        "--plot",
        action="store_true",
        help="after the table, draw each GPU's utilisation and memory over the window",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.timeout is not None and args.prometheus is None:
        raise UsageError("--timeout goes with --prometheus: reading the store takes no network.")
    now = time.time()
    since = parse_moment(args.since, "--since", now)
    until = parse_moment(args.until, "--until", now) if args.until is not None else now
    if since >= until:
        raise UsageError(
            f"--since ({_iso(since)}) is not before --until ({_iso(until)}): give a window "
            "that starts before it ends, e.g. --since 7d --until 1d."
        )
    query = ReportQuery(since, until, ReportBy(args.by), args.idle_min)
    if args.health:
        return _print_health(args, since, until)
    if args.prometheus is not None:
        return _print_prometheus_report(args, query)
    server_from_args(args)  # --prometheus-auth-file alone: said
    return _from_store(args, lambda connection, _: _print_report(args, connection, query))


def _from_store(args: argparse.Namespace, read: Callable[[sqlite3.Connection, Path], int]) -> int:
    """``read`` on the history store ``--db`` names (else the default), opened read-only."""
    path = args.db if args.db is not None else default_history_path()
    connection = open_for_reading(path)
    try:
        return read(connection, path)
    except sqlite3.Error as error:  # a store damaged after it was opened
        raise HistoryError(f"Cannot read the history store {path}: {error}.") from None
    finally:
        connection.close()


def _print_health(args: argparse.Namespace, since: float, until: float) -> int:
    from gputop.cli.report_health import print_health_report

    if args.prometheus is not None or args.csv or args.plot:
        raise UsageError(
            "--health reads the local store, as text or --json: not with --prometheus, "
            "--csv or --plot."
        )
    if args.by != ReportBy.USER.value:
        raise UsageError("--health lists Xids and counters per GPU: --by does not apply.")
    return _from_store(
        args,
        lambda connection, path: print_health_report(connection, path, since, until, args.json),
    )


def _print_report(
    args: argparse.Namespace, connection: sqlite3.Connection, query: ReportQuery
) -> int:
    since, until = query.since, query.until
    rows = build_report(connection, query)
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    columns = plot_columns(width)
    span = recorded_span(connection, since, until) if args.plot else None
    if span is not None:
        columns = plot_columns_for(connection, *span, columns)
    series = gpu_series(connection, *span, columns) if span is not None else []
    claimed = claimed_time(connection, since, until)
    if args.json:
        document = report_to_json(query, rows)
        document["claims"] = [one.to_json() for one in claimed]
        print(strict_json(document, indent=2))
    elif args.csv:
        _write_csv(rows)
    else:
        print(render_table(query, rows))
        for hint in window_hints(connection, query, rows):
            print(hint)
        if claimed:
            print()
            print(render_claims(claimed))
        if args.plot:
            print()
            print(render_plot(series, *(span or (since, until)), columns))
    return 0


def window_hints(
    connection: sqlite3.Connection, query: ReportQuery, rows: list[ReportRow]
) -> list[str]:
    """What a person needs when the window misses what was recorded: samples after its end
    (a simulated clock run faster, ``settings.FAKE_SPEED``, records ahead of real time) or,
    with nothing in it, only before its start; and ``--by job`` with no job in it."""
    hints = []
    # Only times a person can be shown: a time another user wrote by hand (text, year 10000)
    # is no moment to name in --until, and datetime cannot format it.
    samples = (
        "SELECT COUNT(*), MAX(t) FROM samples WHERE t {} ? "
        f"AND typeof(t) IN ('integer', 'real') AND t BETWEEN 0 AND {LATEST_S!r}"
    )
    later, latest = connection.execute(samples.format(">="), (query.until,)).fetchone()
    if later:
        hints.append(
            f"Note: {later} sample(s) were recorded after this window ends, up to "
            f"{_iso(latest)}: add --until {_iso(latest + 1)} (and --since) to include them."
        )
    if not rows:
        earlier, last = connection.execute(samples.format("<"), (query.since,)).fetchone()
        if earlier:
            hints.append(
                f"Note: the store has samples before this window, the last at {_iso(last)}: "
                "widen --since to include them."
            )
    if query.by is ReportBy.JOB and not rows:
        (spans,) = connection.execute(
            "SELECT COUNT(*) FROM process_spans WHERE end_t > ? AND start_t < ?",
            (query.since, query.until),
        ).fetchone()
        if spans:
            hints.append(
                "Processes were recorded in this window, but none belonged to a gputop job "
                "(launched with gputop run or the dashboard): see --by user or --by process."
            )
    return hints


def _print_prometheus_report(args: argparse.Namespace, query: ReportQuery) -> int:
    from gputop.core.history.prometheus_report import prometheus_report

    if args.db is not None or args.plot:
        raise UsageError("--prometheus answers from Prometheus: --db and --plot read the store.")
    timeout_s = args.timeout if args.timeout is not None else TIMEOUT_S
    server = server_from_args(args)
    assert server is not None
    budget = Budget(timeout_s)
    rows = prometheus_report(server, query, budget=budget)
    if args.json:
        print(strict_json(report_to_json(query, rows), indent=2))
    elif args.csv:
        _write_csv(rows)
    else:
        print(render_table(query, rows))
    if budget.passed_over:  # a hostile exporter's series: the others are the report
        print(
            f"gputop: {budget.passed_over} series of over 1 MiB (their labels) passed over: "
            "the report leaves them out; no exporter writes such labels.",
            file=sys.stderr,
        )
    if budget.flooded:  # a target of too many series: the others are the report
        print(f"gputop: {flooded(budget.flooded)}; the report is of the others.", file=sys.stderr)
    return 0


def _write_csv(rows: list[ReportRow]) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(ROW_FIELDS)
    for row in rows:
        writer.writerow([_csv_cell(getattr(row, name)) for name in ROW_FIELDS])


FORMULA_STARTS = ("=", "+", "-", "@")
"""How a cell a spreadsheet would run as a formula starts (OWASP's CSV injection)."""


def _csv_cell(value: object) -> str:
    """A CSV cell: a text that a spreadsheet would read as a formula (another user's command
    line, ``=HYPERLINK(...)``) gets a leading ``'``, which spreadsheets read as "text";
    numbers are written as they are."""
    if value is None:
        return ""
    text = clean(str(value))
    if isinstance(value, str) and text.startswith(FORMULA_STARTS):
        return "'" + text
    return text


HEADERS = (
    "", "WHO", "GPU TIME", "IDLE HELD", "MEAN MEM", "PEAK MEM", "MEAN SM", "SM ACTIVE", "TENSOR"
)  # fmt: skip
"""SM ACTIVE and TENSOR: GPM's, of the cards held (docs/activity.md); N/A without GPM."""


def render_table(query: ReportQuery, rows: list[ReportRow]) -> str:
    """Plain text for a person: idle holders first, marked with ``!``."""
    title = (
        f"GPU use by {query.by.value}, {_iso(query.since)} to {_iso(query.until)} "
        f"(idle: SM under {IDLE_SM_PERCENT:g} % for {elapsed(query.idle_min_s)} or more)"
    )
    if not rows:
        nothing = "No gputop job" if query.by is ReportBy.JOB else "Nothing was recorded"
        return f"{title}\n{nothing} in this window."
    lines = [("", query.by.value.upper(), *HEADERS[2:])]  # USER, GPU, JOB or PROCESS
    for row in rows:
        who = clean(str(row.key))
        if row.user is not None or row.command is not None:
            who = f"{who} {clean(row.user or '?')} {clean(row.command or '')}".rstrip()
        lines.append(
            (
                "!" if row.idle else "",
                who,
                elapsed(row.gpu_seconds),
                elapsed(row.idle_held_seconds) if row.idle else "-",
                human_bytes(row.mean_memory_bytes),
                human_bytes(row.peak_memory_bytes),
                _percent(row.mean_sm_util),
                _percent(row.mean_sm_active_percent),
                _percent(row.mean_tensor_active_percent),
            )
        )
    return "\n".join([title, *_aligned(lines, left=2)])


MAX_ALIGNED_CHARS = 1024
"""The widest a column is padded to: a longer cell (a name or command of megabytes, from a
hand-edited store or a hostile Prometheus) is written whole in its own line only."""


def _aligned(lines: Sequence[tuple[str, ...]], left: int) -> list[str]:
    """Each line's cells in columns two spaces apart: the first ``left`` to the left."""
    widths = [
        min(max(len(line[i]) for line in lines), MAX_ALIGNED_CHARS) for i in range(len(lines[0]))
    ]
    return [
        "  ".join(
            cell.ljust(width) if column < left else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in lines
    ]


def render_claims(claimed: list[ClaimedTime]) -> str:
    """Claimed GPU time per user, and how much of it the cards sat idle (docs/claims.md)."""
    lines = [("user", "claimed", "idle")]
    lines += [(clean(c.user), elapsed(c.claimed_s), elapsed(c.idle_s)) for c in claimed]
    title = f"Claimed GPU time per user (idle: utilisation under {IDLE_SM_PERCENT:g} %)"
    return "\n".join([title, *_aligned(lines, left=1)])


def _percent(value: float | None) -> str:
    return NA if value is None else f"{value:.0f} %"
