"""One refresh of the fleet: the few queries of gputop/core/fleet/queries.py, one deadline
and one memory bound for all of them together (docs/fleet.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gputop.core.fleet import TIMEOUT_S
from gputop.core.fleet.model import Fleet, FreeRule, build_fleet
from gputop.core.fleet.queries import refresh_queries
from gputop.core.prometheus.client import MAX_TOTAL_BYTES, Budget, Sample, Server, query

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
) -> Fleet:
    """The fleet now, as ``server`` sees it; a ``PrometheusError`` saying why not.

    ``early``: given the fleet as the first, quick answers show it (the nodes, their states,
    their cards and memory: ``Fleet.partial``, no card free yet) while the cards' figures are
    still on their way; the dashboard's first frame."""
    budget = Budget(
        timeout_s,
        max_bytes,
        what="refresh",
        advice="narrow the nodes with --match, or ask a Prometheus closer to them",
    )
    queries = refresh_queries(matchers)
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
                early(build_fleet(server.shown, _now(answers), answers, budget.queries, rule, True))
    return build_fleet(server.shown, _now(answers), answers, budget.queries, rule)


def _now(answers: dict[str, list[Sample]]) -> float:
    """The server's clock (its evaluation time), not this machine's."""
    evaluated = [sample.time for sample in answers.get("up", []) if sample.time is not None]
    return max(evaluated) if evaluated else time.time()
