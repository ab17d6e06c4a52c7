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


def _seen_at(seen: float) -> str:
    """The table's age column for a node whose last scrape Prometheus gives as ``seen``."""
    from gputop.core.fleet.fleet_text import age

    target = {"job": "dcgm", "instance": "10.0.0.1:9400"}
    labels = {**target, "gpu": "0", "UUID": "GPU-1"}
    answers: dict[str, list[Sample]] = {
        "up": [Sample(target, NOW, 1.0)],
        "scraped": [Sample(target, NOW, seen)],
        "scrapes": [Sample(target, NOW, 9.0)],
        "cards": [Sample({**labels, "__name__": "DCGM_FI_DEV_FB_USED"}, NOW, 0.0)],
    }
    fleet = build_fleet("http://prometheus:9090", NOW, answers, 4)
    (node,) = fleet.nodes
    return age(fleet, node)


def test_a_node_seen_long_ago_fits_its_column_in_days() -> None:
    """A scrape time of 0 (an exporter whose clock says 1970) was "stale 500000h", seven
    characters in a column of five; days from two days on, and at most ">999d"."""
    assert _seen_at(NOW - 3 * 86400) == "3d"
    assert _seen_at(NOW - 47 * 3600) == "47h"
    assert _seen_at(0.0) == ">999d"
    assert all(len(_seen_at(NOW - s)) <= 5 for s in (0, 130, 7300, 86400 * 400, NOW))
