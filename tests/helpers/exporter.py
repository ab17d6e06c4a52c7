"""The exporter's metrics read in-process: a collector over one sample, parsed back."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gputop.core.exporter.collector import SnapshotCollector


def exposition(collector: SnapshotCollector) -> str:
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode("utf-8")


def samples(collector: SnapshotCollector, name: str) -> list[Sample]:
    """Every sample named ``name`` in the collector's exposition, as a parser reads it."""
    return [
        sample
        for family in text_string_to_metric_families(exposition(collector))
        for sample in family.samples
        if sample.name == name
    ]
