"""``gputop report --prometheus URL``: the history report's rows, from a Prometheus server.

The same questions as the local store (gputop/core/history/report.py) over every host a
Prometheus server scrapes with ``gputop exporter``: PromQL sums each holder's processes on
each card at every step of the window (``query_range``), and the rows follow the report's
rules on those steps: a holder holds a card at a step where one of its processes has a
memory series; its memory and SM % there are its processes' sums (SM capped at 100); it
holds the card idle at a step where every one of its processes there holds memory with SM
known and under 5 %, and such steps count once they form a run of ``idle_min_s`` or more.
Only processes the exporter wrote one by one are seen (its ``--top`` per card). A GPU is
``HOST:INDEX``, since several hosts have a GPU 0. See docs/exporter.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputop.core.history.prometheus_api import MAX_POINTS, query_range
from gputop.core.history.report import ReportBy, ReportQuery, ReportRow
from gputop.core.redact import text_for_others

IDLE_SM_PERCENT = 5
MIN_STEP_S = 15.0
"""Prometheus's default scrape interval: a finer step repeats the same samples."""

MEMORY = "gputop_process_memory_used_bytes"
SM = "gputop_process_sm_util_percent"
CARD = ("Hostname", "gpu")
HOLDER_LABELS = {
    ReportBy.USER: ("user",),
    ReportBy.GPU: (),
    ReportBy.JOB: ("gputop_job", "slurm_job"),
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


def prometheus_report(url: str, query: ReportQuery, step_s: float | None = None) -> list[ReportRow]:
    """The report's rows for ``query`` from the Prometheus server at ``url``."""
    step = step_s if step_s is not None else step_for(query)
    figures = {
        name: query_range(url, promql, query.since, query.until, step)
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
            cards.setdefault((key, card), _Card()).figures[name] = series.points
    for (key, _card), card_figures in cards.items():
        holders[key].add_card(card_figures, step, query.idle_min_s)
    rows = [holder.row(query.by, key) for key, holder in holders.items()]
    return sorted(rows, key=lambda row: (-row.idle_held_seconds, -row.gpu_seconds, str(row.key)))


def _holder_key(by: ReportBy, labels: dict[str, str]) -> tuple[str, ...] | None:
    if by is ReportBy.GPU:
        return (labels.get("Hostname", ""), labels.get("gpu", ""))
    if by is ReportBy.JOB:
        if labels.get("gputop_job"):
            return (f"gputop:{labels['gputop_job']}",)
        if labels.get("slurm_job"):
            return (f"slurm:{labels['slurm_job']}",)
        return None
    return tuple(labels.get(name, "") for name in HOLDER_LABELS[by])


@dataclass
class _Card:
    figures: dict[str, dict[float, float]] = field(default_factory=dict)


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

    def add_card(self, card: _Card, step: float, idle_min_s: float) -> None:
        memory = card.figures.get("memory", {})
        counted = card.figures.get("processes", {})
        sm = card.figures.get("sm", {})
        idle = card.figures.get("idle", {})
        run_s = 0.0
        previous: float | None = None
        for at in sorted(memory):
            self.gpu_seconds += step
            self.memory_sum += memory[at] * step
            self.memory_weight += step
            self.peak = memory[at] if self.peak is None else max(self.peak, memory[at])
            if at in sm:
                self.sm_sum += min(sm[at], 100.0) * step
                self.sm_weight += step
            all_idle = at in counted and idle.get(at, 0.0) >= counted[at]
            if not all_idle or (previous is not None and at - previous > step * 1.5):
                self.idle_s += run_s if run_s >= idle_min_s else 0.0
                run_s = 0.0
            if all_idle:
                run_s += step
            previous = at
        self.idle_s += run_s if run_s >= idle_min_s else 0.0

    def row(self, by: ReportBy, key: tuple[str, ...]) -> ReportRow:
        shown: str | int = ":".join(key) if by is ReportBy.GPU else key[0]
        user = command = None
        if by is ReportBy.PROCESS:
            shown = int(key[0]) if key[0].isascii() and key[0].isdigit() else key[0]
            user, command = key[1], key[2]
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
