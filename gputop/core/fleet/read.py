"""One refresh of the fleet: the few queries of gputop/core/fleet/queries.py, one deadline
and one memory bound for all of them together (docs/fleet.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gputop.core.fleet import TIMEOUT_S
from gputop.core.fleet.model import Fleet, FleetNode, FreeRule, build_fleet
from gputop.core.fleet.queries import node_figures_query, refresh_queries
from gputop.core.prometheus.client import (
    MAX_TOTAL_BYTES,
    Budget,
    PrometheusError,
    Sample,
    Server,
    query,
)

MAX_TIMEOUT_S = 3600.0
EARLY_AFTER = "card_labels"
"""The answers up to this one (the targets, each card's labels and memory) come fast."""


def read_fleet(
    server: Server,
    matchers: str = "",
    timeout_s: float = TIMEOUT_S,
    rule: FreeRule | None = None,
    max_bytes: int = MAX_TOTAL_BYTES,
    early: Callable[[Fleet], None] | None = None,
    every_figure: bool = True,
) -> Fleet:
    """The fleet now, as ``server`` sees it; a ``PrometheusError`` saying why not.

    ``early``: given the fleet as the first, quick answers show it (the nodes, their states,
    their cards and memory: ``Fleet.partial``, no card free yet) while the cards' figures are
    still on their way; the dashboard's first frame. Without ``every_figure``, not the
    cards' temperature, power and activity (``DETAIL_METRICS``: the dashboard's table does
    not show them; ``read_node_figures`` reads them for one node)."""
    budget = Budget(
        timeout_s,
        max_bytes,
        what="refresh",
        advice="narrow the nodes with --match, or ask a Prometheus closer to them",
    )
    queries = refresh_queries(matchers, every_figure)
    # At once: the refresh takes the longest query's time, not their sum (the server
    # evaluates them in parallel too); the budget is one for all of them.
    names = list(queries)
    first = names[: names.index(EARLY_AFTER) + 1] if early is not None else names
    answers: dict[str, list[Sample]] = {}
    with ThreadPoolExecutor(max_workers=len(queries), thread_name_prefix="fleet") as pool:
        # With ``early``, the quick answers first, alone: the big ones' decoding would hold
        # the interpreter while the small ones wait.
        for batch in (first, [name for name in names if name not in first]):
            asked = {name: pool.submit(query, server, queries[name], budget) for name in batch}
            for name, future in asked.items():
                answers[name] = future.result()  # the first failure is said
            if early is not None and EARLY_AFTER in asked:
                partial = build_fleet(
                    server.shown, _now(answers), answers, budget.queries, rule, True, every_figure
                )
                early(partial)
    return build_fleet(
        server.shown, _now(answers), answers, budget.queries, rule, every_figure=every_figure
    )


def read_node_figures(
    server: Server, node: FleetNode, matchers: str = "", timeout_s: float = TIMEOUT_S
) -> list[Sample]:
    """The ``DETAIL_METRICS`` of ``node``'s cards (one query), for ``fill_figures``; a
    ``PrometheusError`` saying why not."""
    promql = node_figures_query(matchers, node.job, node.instance)
    if promql is None:
        raise PrometheusError("this node's name is not text a query can carry")
    budget = Budget(timeout_s, what="read of the node", advice="narrow the nodes with --match")
    return query(server, promql, budget)


def _now(answers: dict[str, list[Sample]]) -> float:
    """The server's clock (its evaluation time), not this machine's."""
    evaluated = [sample.time for sample in answers.get("up", []) if sample.time is not None]
    return max(evaluated) if evaluated else time.time()
