"""``gputop report --prometheus URL``: the history report's rows, from a Prometheus server.

The local store's questions (report.py) over every host a server scrapes with ``gputop
exporter``: PromQL sums each holder's processes on each card at every step of the window
(``query_range``), and the rows follow the report's rules on those steps. A GPU is
``HOST:INDEX``, a job ``HOST:gputop:ID`` (or ``HOST:slurm:ID``). A point stands for the time
since the point before (at most one step), inside the window only, so a server sending
extra points cannot stretch a holding. The rules in full: docs/exporter.md.
"""

from __future__ import annotations

import math
from dataclasses import field

from gputop.core.history.report import ReportBy, ReportQuery, ReportRow, Sums, idle_counted
from gputop.core.history.spans import IDLE_SM_PERCENT
from gputop.core.numbers import MAX_ID_DIGITS, MAX_MEMORY_BYTES
from gputop.core.prometheus.client import (
    MAX_POINTS,
    NO_MAXIMUM,
    TIMEOUT_S,
    Budget,
    Series,
    Server,
    query_range,
)
from gputop.core.records import mutable
from gputop.core.redact import text_for_others

MIN_STEP_S = 15.0
"""Prometheus's default scrape interval: a finer step repeats the same samples."""

MAX_PROCESSES = 1e6
MAX_RATIO = 1.0
"""GPM's activity figures are ratios (dcgm-exporter's unit): above 1 is no reading."""
MAXIMA = {
    "memory": MAX_MEMORY_BYTES,
    "processes": MAX_PROCESSES,
    "idle": MAX_PROCESSES,
    "sm_active": MAX_RATIO,
    "tensor_active": MAX_RATIO,
}
MEMORY = "gputop_process_memory_used_bytes"
SM = "gputop_process_sm_util_percent"
CARD = ("Hostname", "gpu")
ACTIVITY = {
    "sm_active": "DCGM_FI_PROF_SM_ACTIVE",
    "tensor_active": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
}
"""The card figures of each holder's report: the whole GPU's (no ``GPU_I_ID``), per card."""
HOLDER_LABELS = {
    ReportBy.USER: ("user",),
    ReportBy.GPU: (),
    ReportBy.JOB: ("gputop_job", "slurm_job", "user"),
    ReportBy.PROCESS: ("pid", "user", "command"),
}


def report_promql(by: ReportBy) -> dict[str, str]:
    """The PromQL of each figure: summed per holder and card, or (activity) per card.

    A card's activity is averaged over its series (one per exporter scraping it, usually
    one); a MIG GPU instance's series (``GPU_I_ID``) are not the card's."""
    labels = ", ".join((*HOLDER_LABELS[by], *CARD))
    memory, sm = _of_holders(MEMORY, by), _of_holders(SM, by)
    idle = f"({memory} > 0) and on (Hostname, gpu, pid) ({sm} < {IDLE_SM_PERCENT:g})"
    card = ", ".join(CARD)
    return {
        "memory": f"sum by ({labels}) ({memory})",
        "processes": f"count by ({labels}) ({memory})",
        "sm": f"sum by ({labels}) ({sm})",
        "idle": f"count by ({labels}) ({idle})",
        **{name: f'avg by ({card}) ({metric}{{GPU_I_ID=""}})' for name, metric in ACTIVITY.items()},
    }


def _of_holders(metric: str, by: ReportBy) -> str:
    """``metric``'s series that have a holder: for jobs, a gputop job or a Slurm job."""
    if by is ReportBy.JOB:
        return f'({metric}{{gputop_job!=""}} or {metric}{{slurm_job!=""}})'
    return metric


def step_for(query: ReportQuery) -> float:
    return max(MIN_STEP_S, (query.until - query.since) / MAX_POINTS)


def prometheus_report(
    url: Server | str,
    query: ReportQuery,
    step_s: float | None = None,
    timeout_s: float = TIMEOUT_S,
    budget: Budget | None = None,
) -> list[ReportRow]:
    """The report's rows for ``query`` from the Prometheus server at ``url``, all its
    queries within ``timeout_s`` and one memory bound together (``client.Budget``; the
    caller's ``budget``, to learn what it passed over)."""
    step = step_s if step_s is not None else step_for(query)
    budget = budget if budget is not None else Budget(timeout_s)
    figures = {
        name: query_range(
            url, promql, query.since, query.until, step, budget, MAXIMA.get(name, NO_MAXIMUM)
        )
        for name, promql in report_promql(query.by).items()
    }
    # Its queries sum across targets, so a flood of one is met by the bound of all series
    # (``MAX_SERIES``); a server that labels its answers by target anyway has a flooding
    # one's series left out of every figure, as the fleet's are.
    figures = {name: budget.without_flooded(found) for name, found in figures.items()}
    holders: dict[tuple[str, ...], _Holder] = {}
    cards: dict[tuple[tuple[str, ...], tuple[str, str]], _Card] = {}
    activity: dict[tuple[str, str], _Card] = {}
    for name, series_list in figures.items():
        for series in series_list:
            if name in ACTIVITY:
                card = (series.labels.get("Hostname", ""), series.labels.get("gpu", ""))
                activity.setdefault(card, _Card()).figures[name] = series
                continue
            key = _holder_key(query.by, series.labels)
            if key is None:
                continue
            card = (series.labels.get("Hostname", ""), series.labels.get("gpu", ""))
            holders.setdefault(key, _Holder())
            cards.setdefault((key, card), _Card()).figures[name] = series
    for (key, card), card_figures in cards.items():
        holders[key].add_card(card_figures, activity.get(card, _Card()), step, query)
    rows = [holder.row(query.by, key) for key, holder in holders.items()]
    return sorted(rows, key=lambda row: (-row.idle_held_seconds, -row.gpu_seconds, str(row.key)))


def _holder_key(by: ReportBy, labels: dict[str, str]) -> tuple[str, ...] | None:
    if by is ReportBy.GPU:
        return (labels.get("Hostname", ""), labels.get("gpu", ""))
    if by is ReportBy.JOB:  # ids are per user and per host: both are part of the key
        host, user = labels.get("Hostname", ""), labels.get("user", "")
        if labels.get("gputop_job"):
            return (f"{host}:gputop:{labels['gputop_job']}", user)
        if labels.get("slurm_job"):
            return (f"{host}:slurm:{labels['slurm_job']}", user)
        return None
    return tuple(labels.get(name, "") for name in HOLDER_LABELS[by])


@mutable
class _Card:
    figures: dict[str, Series] = field(default_factory=dict)
    """Each figure's series, kept compact until its card is summed."""

    def points(self, name: str) -> dict[float, float | None]:
        series = self.figures.get(name)
        return series.points if series is not None else {}


class _Holder(Sums):
    def add_card(self, card: _Card, activity: _Card, step: float, query: ReportQuery) -> None:
        """Each point held counts from the point before to its own time, at most a step,
        and only inside the window; the card's activity at that point counts as long."""
        memory, counted = card.points("memory"), card.points("processes")
        sm, idle = card.points("sm"), card.points("idle")
        ratios = {name: activity.points(name) for name in ACTIVITY}
        run_s = 0.0
        previous: float | None = None
        for at in sorted(memory):
            since_before = -math.inf if previous is None else previous
            weight = min(at, query.until) - max(since_before, at - step, query.since)
            if weight <= 0:  # the point at the window's start stands for time before it
                previous = at
                continue
            self.gpu_seconds += weight
            held = memory[at]
            if held is not None:
                self.memory_sum += held * weight
                self.memory_weight += weight
                self.peak = held if self.peak is None else max(self.peak, held)
            busy = sm.get(at)
            if busy is not None:
                self.sm_sum += min(busy, 100.0) * weight
                self.sm_weight += weight
            for name, points in ratios.items():
                ratio = points.get(at)
                if ratio is not None:  # checked where it entered: 0 to 1
                    self.activity[name][0] += ratio * 100.0 * weight
                    self.activity[name][1] += weight
            processes, idle_processes = counted.get(at), idle.get(at)
            all_idle = processes is not None and (idle_processes or 0.0) >= processes
            if not all_idle or (previous is not None and at - previous > step * 1.5):
                self.idle_s += idle_counted(run_s, query.idle_min_s)
                run_s = 0.0
            if all_idle:
                run_s += weight
            previous = at
        self.idle_s += idle_counted(run_s, query.idle_min_s)

    def row(self, by: ReportBy, key: tuple[str, ...]) -> ReportRow:
        shown: str | int = ":".join(key) if by is ReportBy.GPU else key[0]
        user = command = None
        if by is ReportBy.PROCESS:
            shown = _pid(key[0])
            user, command = key[1], key[2]
        elif by is ReportBy.JOB:
            user = key[1]
        # an older exporter's label may hold secrets
        return self.report_row(shown, user, text_for_others(command))


def _pid(label: str) -> int | str:
    """A pid label as the number it is; any other text (5,000 digits, say) as it came."""
    if label.isascii() and label.isdigit() and len(label) <= MAX_ID_DIGITS:
        return int(label)
    return label
