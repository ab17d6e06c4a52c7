"""One refresh of the fleet: the few queries of gputop/core/fleet/queries.py, one deadline
and one memory bound for all of them together (docs/fleet.md)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from gputop.core.fleet.model import Fleet, FreeRule, build_fleet
from gputop.core.fleet.queries import refresh_queries
from gputop.core.prometheus.client import MAX_TOTAL_BYTES, Budget, Sample, Server, query

TIMEOUT_S = 10.0
"""The default ``--timeout`` of one refresh, every query and byte together."""
MAX_TIMEOUT_S = 3600.0


def read_fleet(
    server: Server,
    matchers: str = "",
    timeout_s: float = TIMEOUT_S,
    rule: FreeRule | None = None,
    max_bytes: int = MAX_TOTAL_BYTES,
) -> Fleet:
    """The fleet now, as ``server`` sees it; a ``PrometheusError`` saying why not."""
    budget = Budget(
        timeout_s,
        max_bytes,
        what="refresh",
        advice="narrow the nodes with --match, or ask a Prometheus closer to them",
    )
    queries = refresh_queries(matchers)
    # At once: the refresh takes the longest query's time, not their sum (the server
    # evaluates them in parallel too); the budget is one for all of them.
    with ThreadPoolExecutor(max_workers=len(queries), thread_name_prefix="fleet") as pool:
        asked = {
            name: pool.submit(query, server, promql, budget) for name, promql in queries.items()
        }
        answers: dict[str, list[Sample]] = {}
        for name, future in asked.items():
            answers[name] = future.result()  # the first failure is said; the rest end with it
    evaluated = [sample.time for sample in answers["up"] if sample.time is not None]
    now = max(evaluated) if evaluated else time.time()  # the server's clock, not this one's
    return build_fleet(server.shown, now, answers, budget.queries, rule)
