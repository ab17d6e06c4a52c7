"""Hostile exporters scraped by a real Prometheus (Debian's ``/usr/bin/prometheus``), one
Prometheus for the module:

- one card's ``modelName`` of 2 MiB, which Prometheus stores and serves as it came (its
  ``label_value_length_limit`` is unset by default). That one series made the whole fleet a
  "did not answer as Prometheus's API does (a value of more than a megabyte)"; now it is
  passed over and said, and every other node is shown (tests/unit/
  test_attack_prometheus_huge_series.py);
- one target of far more cards than any node has. Alone it took the refresh's whole bound of
  series (``MAX_SERIES``): "answered more than 200,000 series in all", no node shown. Now a
  target past ``MAX_TARGET_SERIES`` in one answer is left out whole and said, the others
  shown (the bounds made small here: 300 cards stand for a million).

docs/fleet.md."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from helpers.fleet import fleet_prometheus, simulated_nodes
from helpers.waiting import wait_for

from gputop.cli.main import main
from gputop.core.prometheus import answer as prometheus_answer

HUGE_MODEL = "H100 " + "x" * (2 << 20)
FLOOD_CARDS = 300


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A Prometheus scraping three nodes; its URL, and the flooding node's target."""
    tmp_path = tmp_path_factory.mktemp("fleet-hostile")
    nodes = [
        {"kind": "dcgm", "hostname": "good-1", "gpus": [{}, {}]},
        {"kind": "dcgm", "hostname": "hostile-1", "gpus": [{"model": HUGE_MODEL}, {}]},
        {"kind": "dcgm", "hostname": "flood-1", "gpus": [{}] * FLOOD_CARDS},
    ]
    with (
        simulated_nodes(tmp_path, nodes) as targets,
        fleet_prometheus(tmp_path / "prometheus", targets) as prometheus,
    ):
        wait_for(
            lambda: (
                sorted(
                    int(row["value"][1])
                    for row in prometheus.query(
                        'count by (Hostname) (DCGM_FI_DEV_FB_USED{cluster="a"})'
                    )
                )
                == [2, 2, FLOOD_CARDS]
            ),
            "every node's cards in Prometheus",
            60,
        )
        long_ones = prometheus.query('count(DCGM_FI_DEV_FB_USED{modelName=~"H100 x+"})')
        assert long_ones and long_ones[0]["value"][1] == "1"  # stored whole, as it came
        yield prometheus.url, targets[2]


def test_a_label_of_megabytes_on_one_node_hides_no_other_node(
    prometheus_url: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = prometheus_url
    code = main(["snapshot", "--prometheus", url, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    document = json.loads(out)
    hosts = {node["host"]: node for node in document["nodes"]}
    assert len(hosts["good-1"]["gpus"]) == 2
    assert len(hosts["flood-1"]["gpus"]) == FLOOD_CARDS  # under the bounds: a node as any
    hostile = hosts["hostile-1"]["gpus"]
    # Its card's figures come without the label (max by the card's key); only the series
    # that carry it are passed over: the card is there, its name not known.
    assert [(gpu["index"], gpu["name"]) for gpu in hostile] == [
        (0, None),
        (1, "NVIDIA H100 80GB HBM3"),
    ]
    assert document["summary"]["series_passed_over"] >= 1
    assert document["summary"]["targets_left_out"] == []


def test_a_target_of_too_many_series_is_left_out_and_the_others_are_shown(
    prometheus_url: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, flood_target = prometheus_url
    # 300 cards stand for a million: past the bound of one target, and alone past all.
    monkeypatch.setattr(prometheus_answer, "MAX_TARGET_SERIES", 100)
    monkeypatch.setattr(prometheus_answer, "MAX_SERIES", 250)
    code = main(["snapshot", "--prometheus", url, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err  # was: "answered more than 250 series in all for this refresh"
    document = json.loads(out)
    hosts = {node["host"]: node for node in document["nodes"]}
    assert sorted(hosts) == ["good-1", "hostile-1"]  # the flood's node left out whole
    assert len(hosts["good-1"]["gpus"]) == 2 and len(hosts["hostile-1"]["gpus"]) == 2
    (left_out,) = document["summary"]["targets_left_out"]
    assert left_out["job"] == "nodes" and left_out["instance"] == flood_target
    assert left_out["series_at_least"] > 100
    assert document["summary"]["gpus"] == 4

    code = main(["snapshot", "--prometheus", url])
    out, err = capsys.readouterr()
    assert code == 0, err
    header = out.splitlines()[0]
    assert header.startswith("2 nodes · 4 GPUs")
    assert f"{flood_target} left out: over 100 series in one answer" in header
    assert "flood-1" not in out
