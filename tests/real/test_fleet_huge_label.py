"""A hostile exporter scraped by a real Prometheus (Debian's ``/usr/bin/prometheus``): one
card's ``modelName`` of 2 MiB, which Prometheus stores and serves as it came (its
``label_value_length_limit`` is unset by default). That one series made the whole fleet a
"did not answer as Prometheus's API does (a value of more than a megabyte)"; now it is
passed over and said, and every other node is shown. docs/fleet.md,
tests/unit/test_attack_prometheus_huge_series.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.fleet import fleet_prometheus, simulated_nodes
from helpers.waiting import wait_for

from gputop.cli.main import main

HUGE_MODEL = "H100 " + "x" * (2 << 20)


def test_a_label_of_megabytes_on_one_node_hides_no_other_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [
        {"kind": "dcgm", "hostname": "good-1", "gpus": [{}, {}]},
        {"kind": "dcgm", "hostname": "hostile-1", "gpus": [{"model": HUGE_MODEL}, {}]},
    ]
    with (
        simulated_nodes(tmp_path, nodes) as targets,
        fleet_prometheus(tmp_path / "prometheus", targets) as prometheus,
    ):
        wait_for(
            lambda: (
                len(prometheus.query('count by (Hostname) (DCGM_FI_DEV_FB_USED{cluster="a"})')) == 2
            ),
            "both nodes' cards in Prometheus",
            60,
        )
        long_ones = prometheus.query('count(DCGM_FI_DEV_FB_USED{modelName=~"H100 x+"})')
        assert long_ones and long_ones[0]["value"][1] == "1"  # stored whole, as it came

        code = main(["snapshot", "--prometheus", prometheus.url, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        document = json.loads(out)
        hosts = {node["host"]: node for node in document["nodes"]}
        assert len(hosts["good-1"]["gpus"]) == 2
        hostile = hosts["hostile-1"]["gpus"]
        # Its card's figures come without the label (max by the card's key); only the series
        # that carry it are passed over: the card is there, its name not known.
        assert [(gpu["index"], gpu["name"]) for gpu in hostile] == [
            (0, None),
            (1, "NVIDIA H100 80GB HBM3"),
        ]
        assert document["summary"]["series_passed_over"] >= 1
