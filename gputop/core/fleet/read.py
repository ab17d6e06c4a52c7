"""One refresh of the fleet: the few queries of gputop/core/fleet/queries.py, one deadline
and one memory bound for all of them together (docs/fleet.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gputop.core.fleet import TIMEOUT_S
from gputop.core.fleet.model import Fleet, FleetNode, build_fleet
from gputop.core.fleet.queries import node_figures_query, refresh_queries, user_counts_query
from gputop.core.free_cards import FreePolicy
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
    rule: FreePolicy | None = None,
    max_bytes: int = MAX_TOTAL_BYTES,
    early: Callable[[Fleet], None] | None = None,
    every_figure: bool = True,
) -> Fleet:
    """The fleet now, as ``server`` sees it; a ``PrometheusError`` saying why not.

    ``early``: given the fleet as the first, quick answers show it (``Fleet.partial``), for
    the dashboard's first frame. Without ``every_figure``, not the ``DETAIL_METRICS``
    (``read_node_figures`` reads them for one node)."""
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
                    server.shown,
                    _now(answers),
                    _without_flooded(answers, budget),
                    budget.queries,
                    rule,
                    True,
                    every_figure,
                )
                _left_out(partial, budget)
                early(partial)
    fleet = build_fleet(
        server.shown,
        _now(answers),
        _without_flooded(answers, budget),
        budget.queries,
        rule,
        every_figure=every_figure,
    )
    _left_out(fleet, budget)
    return fleet


def _without_flooded(answers: dict[str, list[Sample]], budget: Budget) -> dict[str, list[Sample]]:
    """Every answer less the series of a target that flooded any of them (``MAX_TARGET_SERIES``
    in one answer): such a node is left out whole, not shown with half its series."""
    return {name: budget.without_flooded(samples) for name, samples in answers.items()}


def _left_out(fleet: Fleet, budget: Budget) -> None:
    """What a hostile target made the refresh leave out, the others still read: series of
    over a megabyte, and targets of too many series."""
    fleet.passed_over = budget.passed_over
    fleet.flooded = dict(budget.flooded)


def read_node_figures(
    server: Server, node: FleetNode, matchers: str = "", timeout_s: float = TIMEOUT_S
) -> list[Sample]:
    """The ``DETAIL_METRICS`` of ``node``'s cards and its processes (two queries, at once),
    for ``fill_figures``; a ``PrometheusError`` saying why not."""
    promql = node_figures_query(matchers, node.job, node.instance)
    if promql is None:
        raise PrometheusError("this node's name is not text a query can carry")
    budget = Budget(timeout_s, what="read of the node", advice="narrow the nodes with --match")
    with ThreadPoolExecutor(max_workers=len(promql), thread_name_prefix="fleet-node") as pool:
        asked = [pool.submit(query, server, each, budget) for each in promql]
        return [sample for future in asked for sample in future.result()]


def read_user_counts(
    server: Server, matchers: str = "", timeout_s: float = TIMEOUT_S
) -> list[Sample]:
    """The users' idle memory and GPU counts on every node (one query), for
    ``fill_user_counts``: the dashboard's users' view; a ``PrometheusError`` saying why not."""
    budget = Budget(timeout_s, what="read of the users", advice="narrow the nodes with --match")
    return query(server, user_counts_query(matchers), budget)


def _now(answers: dict[str, list[Sample]]) -> float:
    """The server's clock (its evaluation time), not this machine's."""
    evaluated = [sample.time for sample in answers.get("up", []) if sample.time is not None]
    return max(evaluated) if evaluated else time.time()


EARLY_HOLD_S = 3.0
"""How long the first read holds its big answers for the dashboard to paint the first,
quick ones (Textual loading and mounting, then a frame: well under a second)."""


class FirstRead:
    """The dashboard's first read of the fleet, started before Textual is imported (0.3 s),
    so the first frame is drawn as soon as the app stands. ``follow`` is the app's
    ``progressive`` source: its first call gives this read, each later call reads afresh.
    The big answers wait until the early fleet is painted (at most ``EARLY_HOLD_S``)."""

    def __init__(self, read: Callable[[Callable[[Fleet], None]], Fleet]) -> None:
        self._read = read
        self._partial: Fleet | None = None
        self._fleet: Fleet | None = None
        self._error: BaseException | None = None
        self._arrived = threading.Event()
        """The early fleet is here, or the read ended."""
        self._painted = threading.Event()
        self._done = threading.Event()
        self._followed = False
        self._lock = threading.Lock()

    @classmethod
    def start(cls, read: Callable[[Callable[[Fleet], None]], Fleet]) -> FirstRead:
        """``read(early)``, ``read_fleet`` with its ``early``, begun on a thread of its own."""
        first = cls(read)
        threading.Thread(target=first._run, name="fleet-first", daemon=True).start()
        return first

    def _run(self) -> None:
        try:
            self._fleet = self._read(self._early)
        except BaseException as error:  # given to the app's worker, which says it
            self._error = error
        finally:
            self._done.set()
            self._arrived.set()

    def _early(self, fleet: Fleet) -> None:
        self._partial = fleet
        self._arrived.set()
        self._painted.wait(EARLY_HOLD_S)

    def follow(self, early: Callable[[Fleet], None]) -> Fleet:
        with self._lock:
            again, self._followed = self._followed, True
        if again:
            return self._read(early)
        self._arrived.wait()
        try:
            if self._partial is not None:
                early(self._partial)  # the app's: returns once it is painted
        finally:
            self._painted.set()
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._fleet is not None
        return self._fleet
