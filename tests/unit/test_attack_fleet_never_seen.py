"""A node Prometheus has cards of but no time it was seen (no ``up``, no scrape time, no
sample time: a broken or hostile Prometheus) is "never seen" in its detail, as its table row
says "never", not "seen never ago"."""

from __future__ import annotations

from gputop.core.fleet.model import build_fleet
from gputop.core.prometheus.client import Sample
from gputop.tui.fleet.fleet_views import node_detail

NOW = 1_800_000_000.0


def test_a_node_never_seen_is_said_so_in_plain_words() -> None:
    labels = {"job": "dcgm", "instance": "10.0.0.1:9400", "gpu": "0", "UUID": "GPU-1"}
    answers: dict[str, list[Sample]] = {
        "up": [],
        "scraped": [],
        "scrapes": [],
        "cards": [Sample({**labels, "__name__": "DCGM_FI_DEV_FB_USED"}, NOW, 0.0)],
    }
    fleet = build_fleet("http://prometheus:9090", NOW, answers, 4)
    (node,) = fleet.nodes
    assert node.last_seen is None
    text = node_detail(fleet, node).plain
    assert "never ago" not in text
    assert "stale, never seen" in text


def test_a_node_seen_says_how_long_ago() -> None:
    target = {"job": "dcgm", "instance": "10.0.0.1:9400"}
    labels = {**target, "gpu": "0", "UUID": "GPU-1"}
    answers: dict[str, list[Sample]] = {
        "up": [Sample(target, NOW, 1.0)],
        "scraped": [Sample(target, NOW, NOW - 600)],
        "scrapes": [Sample(target, NOW, 9.0)],
        "cards": [Sample({**labels, "__name__": "DCGM_FI_DEV_FB_USED"}, NOW, 0.0)],
    }
    fleet = build_fleet("http://prometheus:9090", NOW, answers, 4)
    (node,) = fleet.nodes
    assert "stale, seen 10m ago" in node_detail(fleet, node).plain
