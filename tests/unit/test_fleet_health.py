"""A card's health in the fleet (docs/fleet.md, docs/health.md): the verdict from the health
series Prometheus has (gputop's ``gputop_gpu_health`` and dcgm-exporter's names), by the
core's own rules (gputop/core/health.py), in the JSON, the per-card character, the node's
line, and never a critical card free. From answers built here as a Prometheus would give
them; the same against a real Prometheus: tests/real/test_fleet_prometheus.py."""

from __future__ import annotations

import pytest

from gputop.core.fleet.fleet_json import fleet_to_json
from gputop.core.fleet.fleet_text import (
    LABEL_SHOWN,
    LEGEND,
    card_cell,
    node_badge,
    node_line,
    render_fleet,
    shown_label,
)
from gputop.core.fleet.model import Fleet, build_fleet
from gputop.core.fleet.queries import CARD_METRICS, refresh_queries
from gputop.core.health import badge, verdict
from gputop.core.model import EccCounts, GpuHealth, RemappedRows, XidEvent
from gputop.core.prometheus.client import Sample

NOW = 1_800_000_000.0
TARGET = {"job": "dcgm", "instance": "n1:9400"}


def sample(value: float | None, **labels: str) -> Sample:
    return Sample({**TARGET, **labels}, NOW, value)


def card(name: str, value: float | None, gpu: str = "0") -> Sample:
    return sample(value, __name__=name, gpu=gpu, UUID=f"GPU-{gpu}", Hostname="n1")


def idle(gpu: str = "0") -> list[Sample]:
    return [
        card("DCGM_FI_DEV_FB_USED", 0.0, gpu),
        card("DCGM_FI_DEV_FB_FREE", 80000.0, gpu),
        card("DCGM_FI_DEV_GPU_UTIL", 0.0, gpu),
    ]


def fleet(cards: list[Sample], gputop: bool = False) -> Fleet:
    answers = {
        "up": [sample(1.0)],
        "scraped": [sample(NOW - 1.0)],
        "scrapes": [sample(9.0)],
        "cards": cards,
    }
    if gputop:
        answers["nodes"] = [sample(NOW, __name__="gputop_last_sample_timestamp_seconds")]
    return build_fleet("http://p", NOW, answers, 8)


def test_the_health_series_are_read_in_the_refresh_s_card_query_not_one_of_their_own() -> None:
    queries = refresh_queries("")
    assert len(queries) == 8  # the same queries; the health series ride in "cards"
    for name in (
        "gputop_gpu_health",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_RETIRED_PENDING",
    ):
        assert name in CARD_METRICS and name in queries["cards"]


@pytest.mark.parametrize(
    ("series", "value", "level", "free"),
    [
        ("DCGM_FI_DEV_XID_ERRORS", 0.0, "ok", True),  # dcgm-exporter's "no Xid"
        ("DCGM_FI_DEV_XID_ERRORS", 79.0, "critical", False),  # fell off the bus
        ("DCGM_FI_DEV_XID_ERRORS", 48.0, "critical", False),  # uncorrectable ECC
        ("DCGM_FI_DEV_XID_ERRORS", 13.0, "warning", True),  # a program's fault
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", 1.0, "critical", False),
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0.0, "ok", True),
        ("DCGM_FI_DEV_ROW_REMAP_PENDING", 1.0, "warning", True),
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 3.0, "critical", False),
        ("DCGM_FI_DEV_RETIRED_PENDING", 1.0, "warning", True),
        ("gputop_gpu_health", 2.0, "critical", False),
        ("gputop_gpu_health", 1.0, "warning", True),
        ("gputop_gpu_health", 0.0, "ok", True),
    ],
)
def test_the_verdict_by_the_core_s_rules_and_a_critical_card_is_never_free(
    series: str, value: float, level: str, free: bool
) -> None:
    gputop = series.startswith("gputop_")
    (node,) = fleet([*idle(), card(series, value)], gputop=gputop).nodes
    (gpu,) = node.sorted_gpus()
    assert gpu.verdict.level == level
    assert gpu.free is free
    assert [g.index for g in node.free_gpus] == ([0] if free else [])
    document = fleet_to_json(fleet([*idle(), card(series, value)], gputop=gputop))
    health = document["nodes"][0]["gpus"][0]["health"]
    assert health["verdict"] == level and health["healthy"] is (level == "ok")
    assert document["summary"]["free_gpus"] == int(free)


def test_the_same_badge_as_the_dashboard_s_from_the_same_data() -> None:
    (node,) = fleet(
        [
            *idle(),
            card("DCGM_FI_DEV_XID_ERRORS", 79.0),
            card("DCGM_FI_DEV_ROW_REMAP_PENDING", 1.0),
            card("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0.0),
            card("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 2.0),
        ]
    ).nodes
    (gpu,) = node.sorted_gpus()
    local = GpuHealth(
        ecc=EccCounts(uncorrected_volatile=2),
        remapped_rows=RemappedRows(correctable=0, uncorrectable=0, pending=True, failed=False),
        xid_events=(XidEvent(79, NOW),),
    )
    assert badge(gpu.verdict) == badge(verdict(local)) == "✖ Xid 79 fell off the bus (+2)"
    assert [r.text for r in gpu.verdict.reasons] == [r.text for r in verdict(local).reasons]
    health = fleet_to_json(fleet([*idle(), card("DCGM_FI_DEV_XID_ERRORS", 79.0)]))["nodes"][0][
        "gpus"
    ][0]["health"]
    assert health["last_xid"] == 79 and health["verdict"] == "critical"
    assert health["reasons"][0]["reason"] == "Xid 79 fell off the bus"
    assert health["action"] == health["reasons"][0]["action"] and "reboot" in health["action"]


def test_gputop_s_own_verdict_counts_where_its_last_xid_says_less() -> None:
    """gputop's exporter judged on every Xid since it started; its last one (13) is milder
    than the 79 before it: the card is critical, as the node's gputop says."""
    (node,) = fleet(
        [*idle(), card("DCGM_FI_DEV_XID_ERRORS", 13.0), card("gputop_gpu_health", 2.0)],
        gputop=True,
    ).nodes
    (gpu,) = node.sorted_gpus()
    assert gpu.verdict.level == "critical" and not gpu.free
    assert gpu.verdict.reasons[0].text == "critical by gputop on its node"
    assert gpu.verdict.reasons[1].text.startswith("Xid 13 ")


@pytest.mark.parametrize(
    "extra",
    [
        [],
        [card("DCGM_FI_DEV_RETIRED_PENDING", 7.0)],  # not a flag: unknown
        [card("gputop_gpu_health", 5.0)],  # no verdict: unknown, not critical
        [card("gputop_gpu_health", 1.5)],
        [card("DCGM_FI_DEV_XID_ERRORS", None)],  # NaN
    ],
)
def test_no_health_series_or_none_that_holds_is_no_health_not_ok(extra: list[Sample]) -> None:
    gputop = any(each.labels["__name__"].startswith("gputop_") for each in extra)
    document = fleet_to_json(fleet([*idle(), *extra], gputop=gputop))
    (gpu,) = document["nodes"][0]["gpus"]
    assert gpu["health"] is None and gpu["free"]


def test_the_card_s_character_and_the_node_s_line_mark_it() -> None:
    cards = [
        *idle("0"),
        *idle("1"),
        card("DCGM_FI_DEV_ROW_REMAP_PENDING", 1.0, "1"),
        *idle("2"),
        card("DCGM_FI_DEV_XID_ERRORS", 79.0, "2"),
        *idle("3"),
    ]
    built = fleet(cards)
    (node,) = built.nodes
    assert "".join(card_cell(gpu, node) for gpu in node.sorted_gpus()) == "Fw!F"
    assert [g.index for g in node.free_gpus] == [0, 1, 3]
    assert node_badge(node) == "✖ GPU 2 Xid 79 fell off the bus, +1 GPU"
    line = node_line(built, node, None)
    assert "[Fw!F]" in line and line.index("✖ GPU 2 Xid 79") > line.index("[Fw!F]")
    assert "! critical" in LEGEND and "w warning" in LEGEND
    healthy = fleet(idle())
    assert node_badge(healthy.nodes[0]) is None
    assert "✖" not in node_line(healthy, healthy.nodes[0], None)


def test_a_label_as_long_as_a_hostile_prometheus_sends_is_cut_on_the_node_s_line() -> None:
    """A pod, a user or a --group-by value is another machine's text: 100 KB of it made a
    node's line (and ``snapshot --prometheus`` piped, with no width) 100 KB long. Each is
    cut to ``LABEL_SHOWN`` characters, with an ellipsis, after the sanitiser. Fails on the
    old code."""
    long = "p" * 100_000
    cards = [
        *[s for s in idle() if s.labels["__name__"] != "DCGM_FI_DEV_FB_USED"],
        sample(
            1000.0, __name__="DCGM_FI_DEV_FB_USED", gpu="0", UUID="GPU-0", Hostname="n1", pod=long
        ),
    ]
    built = fleet(cards)
    line = node_line(built, built.nodes[0], None)
    assert len(line) < 200 and "p" * LABEL_SHOWN in line and "…" in line, len(line)
    built.nodes[0].labels["rack"] = "r" * 100_000
    text = render_fleet(built, None, "rack")
    assert max(len(row) for row in text.splitlines()) < 200
    assert "r" * LABEL_SHOWN + "…" in text
    escaped = "\x1b" * 1000  # the sanitiser first: what is cut is its visible escapes
    assert len(shown_label(escaped)) == LABEL_SHOWN + 1 and "\x1b" not in shown_label(escaped)
