"""``gputop report --prometheus URL``: the history report's rows, from a Prometheus server.

The same questions as the local store (gputop/core/history/report.py) over every host a
Prometheus server scrapes with ``gputop exporter``: PromQL sums each holder's processes on
each card at every step of the window (``query_range``), and the rows follow the report's
rules on those steps: a holder holds a card at a step where one of its processes has a
memory series; its memory and SM % there are its processes' sums (SM capped at 100); it
holds the card idle at a step where every one of its processes there holds memory with SM
known and under 5 %, and such steps count once they form a run of ``idle_min_s`` or more.
Only processes the exporter wrote one by one are seen (its ``--top`` per card). A GPU is
``HOST:INDEX``, since several hosts have a GPU 0; a job is ``HOST:gputop:ID`` (or
``HOST:slurm:ID``) with its user, since job ids are per user and per host.

A point at time ``t`` is what Prometheus saw last at ``t`` (its newest sample then), so it
stands for the time since the point before (at most one step), inside the window only: a
holder present all of a one-hour window holds 1:00:00 (the point at its start stands for
time before it), and a server sending extra points cannot make a holder hold a card longer
than the window.
See docs/exporter.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gputop.core.history.prometheus_api import (
    MAX_POINTS,
    NO_MAXIMUM,
    TIMEOUT_S,
    Budget,
    Series,
    query_range,
)
from gputop.core.history.report import ReportBy, ReportQuery, ReportRow
from gputop.core.numbers import MAX_ID_DIGITS
from gputop.core.redact import text_for_others

IDLE_SM_PERCENT = 5
MIN_STEP_S = 15.0
"""Prometheus's default scrape interval: a finer step repeats the same samples."""

MAX_MEMORY_BYTES = float(2**50)
"""1 PiB, as for a lab host's values (gputop/core/remote/host_values.py): more than any card
holds; a larger value is unknown."""
MAX_PROCESSES = 1e6
MAXIMA = {"memory": MAX_MEMORY_BYTES, "processes": MAX_PROCESSES, "idle": MAX_PROCESSES}
MEMORY = "gputop_process_memory_used_bytes"
SM = "gputop_process_sm_util_percent"
CARD = ("Hostname", "gpu")
HOLDER_LABELS = {
    ReportBy.USER: ("user",),
    ReportBy.GPU: (),
    ReportBy.JOB: ("gputop_job", "slurm_job", "user"),
    ReportBy.PROCESS: ("pid", "user", "command"),
}


def report_promql(by: ReportBy) -> dict[str, str]:
    """The PromQL of each figure, summed per holder and card."""
    labels = ", ".join((*HOLDER_LABELS[by], *CARD))
    memory, sm = _of_holders(MEMORY, by), _of_holders(SM, by)
    idle = f"({memory} > 0) and on (Hostname, gpu, pid) ({sm} < {IDLE_SM_PERCENT})"
    return {
        "memory": f"sum by ({labels}) ({memory})",
        "processes": f"count by ({labels}) ({memory})",
        "sm": f"sum by ({labels}) ({sm})",
        "idle": f"count by ({labels}) ({idle})",
    }


def _of_holders(metric: str, by: ReportBy) -> str:
    """``metric``'s series that have a holder: for jobs, a gputop job or a Slurm job."""
    if by is ReportBy.JOB:
        return f'({metric}{{gputop_job!=""}} or {metric}{{slurm_job!=""}})'
    return metric


def step_for(query: ReportQuery) -> float:
    return max(MIN_STEP_S, (query.until - query.since) / MAX_POINTS)


def prometheus_report(
    url: str, query: ReportQuery, step_s: float | None = None, timeout_s: float = TIMEOUT_S
) -> list[ReportRow]:
    """The report's rows for ``query`` from the Prometheus server at ``url``, all its
    queries within ``timeout_s`` and one memory bound together (prometheus_api.Budget)."""
    step = step_s if step_s is not None else step_for(query)
    budget = Budget(timeout_s)
    figures = {
        name: query_range(
            url, promql, query.since, query.until, step, budget, MAXIMA.get(name, NO_MAXIMUM)
        )
        for name, promql in report_promql(query.by).items()
    }
    holders: dict[tuple[str, ...], _Holder] = {}
    cards: dict[tuple[tuple[str, ...], tuple[str, str]], _Card] = {}
    for name, series_list in figures.items():
        for series in series_list:
            key = _holder_key(query.by, series.labels)
            if key is None:
                continue
            card = (series.labels.get("Hostname", ""), series.labels.get("gpu", ""))
            holders.setdefault(key, _Holder(series.labels))
            cards.setdefault((key, card), _Card()).figures[name] = series
    for (key, _card), card_figures in cards.items():
        holders[key].add_card(card_figures, step, query)
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


@dataclass
class _Card:
    figures: dict[str, Series] = field(default_factory=dict)
    """Each figure's series, kept compact until its card is summed."""

    def points(self, name: str) -> dict[float, float | None]:
        series = self.figures.get(name)
        return series.points if series is not None else {}


@dataclass
class _Holder:
    labels: dict[str, str]
    gpu_seconds: float = 0.0
    idle_s: float = 0.0
    memory_sum: float = 0.0
    memory_weight: float = 0.0
    sm_sum: float = 0.0
    sm_weight: float = 0.0
    peak: float | None = None

    def add_card(self, card: _Card, step: float, query: ReportQuery) -> None:
        """Each point held counts from the point before to its own time, at most a step,
        and only inside the window."""
        memory, counted = card.points("memory"), card.points("processes")
        sm, idle = card.points("sm"), card.points("idle")
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
            processes, idle_processes = counted.get(at), idle.get(at)
            all_idle = processes is not None and (idle_processes or 0.0) >= processes
            if not all_idle or (previous is not None and at - previous > step * 1.5):
                self.idle_s += run_s if run_s >= query.idle_min_s else 0.0
                run_s = 0.0
            if all_idle:
                run_s += weight
            previous = at
        self.idle_s += run_s if run_s >= query.idle_min_s else 0.0

    def row(self, by: ReportBy, key: tuple[str, ...]) -> ReportRow:
        shown: str | int = ":".join(key) if by is ReportBy.GPU else key[0]
        user = command = None
        if by is ReportBy.PROCESS:
            shown = _pid(key[0])
            user, command = key[1], key[2]
        elif by is ReportBy.JOB:
            user = key[1]
        return ReportRow(
            key=shown,
            gpu_seconds=self.gpu_seconds,
            idle_held_seconds=self.idle_s,
            mean_memory_bytes=round(self.memory_sum / self.memory_weight)
            if self.memory_weight
            else None,
            peak_memory_bytes=int(self.peak) if self.peak is not None else None,
            mean_sm_util=self.sm_sum / self.sm_weight if self.sm_weight else None,
            user=user,
            command=text_for_others(command),  # an older exporter's label may hold secrets
        )


def _pid(label: str) -> int | str:
    """A pid label as the number it is; any other text (5,000 digits, say) as it came."""
    if label.isascii() and label.isdigit() and len(label) <= MAX_ID_DIGITS:
        return int(label)
    return label
