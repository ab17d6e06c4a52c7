"""``gputop report --health``: the window's Xids and the cards whose counters rose, as text
a person reads at 80 columns (every text from the store sanitised) or strict JSON.
See docs/health.md."""

from __future__ import annotations

import sqlite3
import textwrap

from gputop.core.history.health_report import HealthReport, build_health_report
from gputop.core.history.health_report import health_report_to_json as to_json
from gputop.core.history.store import HEALTH_FROM, HistoryError
from gputop.core.numbers import strict_json
from gputop.core.safe_text import clean
from gputop.core.units import local_time
from gputop.core.xid import describe

WIDTH = 80
MAX_PROCESSES_SHOWN = 5


def print_health_report(
    connection: sqlite3.Connection, path: object, since: float, until: float, as_json: bool
) -> int:
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    if int(version) < HEALTH_FROM:
        raise HistoryError(
            f"The history store {path} is from an older gputop (version {version}) that kept "
            "no Xids or health counters: run 'gputop record' once to bring it up to date; "
            "it records them from then on."
        )
    report = build_health_report(connection, since, until)
    if as_json:
        print(strict_json(to_json(report), indent=2))
    else:
        print(render_health(report))
    return 0


def render_health(report: HealthReport) -> str:
    lines = [f"Xids and health counters, {local_time(report.since)} to {local_time(report.until)}"]
    if not report.events:
        lines.append("No Xid was recorded in this window.")
    else:
        lines.append(f"{'FIRST SEEN':<19}  {'GPU':>3}  {'XID':>4}  {'COUNT':>7}  WHAT")
    for event in report.events:
        info = describe(event.xid)
        head = f"{local_time(event.time):<19}  {event.gpu:>3}  {event.xid:>4}  {event.count:>7}  "
        lines.append(_cut(head + info.short))
        indent = " " * 6
        if event.count > 1 and event.last_time > event.time:
            lines.append(_cut(f"{indent}until {local_time(event.last_time)}"))
        lines += textwrap.wrap(
            f"what to do: {info.action}",
            WIDTH,
            initial_indent=indent,
            subsequent_indent=indent + "  ",
        )
        processes = list(event.processes.values())
        for process in processes[:MAX_PROCESSES_SHOWN]:
            job = f" (job {clean(process.job)})" if process.job else ""
            lines.append(
                _cut(
                    f"{indent}on the card: {process.pid} {clean(process.user or '?')}{job} "
                    f"{clean(process.command or '')}".rstrip()
                )
            )
        if len(processes) > MAX_PROCESSES_SHOWN:
            lines.append(f"{indent}and {len(processes) - MAX_PROCESSES_SHOWN} more processes")
    if report.counters:
        lines.append("")
        lines.append("Health counters that rose:")
        for rise in report.counters:
            uuid = f" {clean(rise.uuid)}" if rise.uuid else ""
            lines.append(_cut(f"GPU {rise.gpu}{uuid}"))
            for name, up in rise.rise.items():
                lines.append(_cut(f"      {name}: {rise.first[name]} -> {rise.last[name]} (+{up})"))
    if report.skipped_rows:
        lines.append(
            f"{report.skipped_rows} row(s) of the store held numbers out of range and were "
            "left out."
        )
    if report.unknown_counters:
        lines.append(
            f"{report.unknown_counters} counter value(s) of the store were out of range: "
            "each is not known, the others of its row kept."
        )
    return "\n".join(lines)


def _cut(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"
