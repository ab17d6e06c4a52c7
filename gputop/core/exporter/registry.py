"""The exporter's registry: ``/metrics?name[]=X`` answers the series named X.

prometheus_client's default ``restricted_registry`` finds collectors by the names they
describe at registration; the snapshot collector describes none (its series follow each
snapshot), so every such scrape got an empty 200. Here the filter runs on what the
collectors give at that scrape, keeping the samples asked for as prometheus_client's own
filter does, for whatever serves the page (server.py, or ``make_wsgi_app``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

MAX_NAMES = 1000
"""More names than any exporter has series: the rest are ignored."""


class MetricsRegistry(CollectorRegistry):
    """A ``CollectorRegistry`` whose ``name[]`` filter works for collectors that describe
    nothing in advance."""

    def restricted_registry(self, names: Iterable[str]) -> NamedOnly:  # type: ignore[override]
        return NamedOnly(self, names)


class NamedOnly:
    """The samples of ``registry`` whose names are in ``names``, by family."""

    def __init__(self, registry: CollectorRegistry, names: Iterable[str]) -> None:
        self._registry = registry
        self._names = frozenset(name for name, _ in zip(names, range(MAX_NAMES), strict=False))

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            samples = [sample for sample in family.samples if sample.name in self._names]
            if samples:
                kept = Metric(family.name, family.documentation, family.type, family.unit)
                kept.samples = samples
                yield kept
