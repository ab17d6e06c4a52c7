"""A target left out for a flood of series costs the others nothing (found by attacking the
first version of it): its first series stayed counted in the refresh's bound of all series,
in every answer it filled to just under its own bound, so one such target took 80,000 of
the 200,000 and ten took all of them (no node shown, the failure the bound of one target
was made for). And ``report --prometheus`` said a target was left out while its series
read before the flood stayed in the report. A real HTTP server on loopback answering each
query by its name; the bounds made small. docs/fleet.md."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from gputop.cli.main import main
from gputop.core.fleet.queries import refresh_queries
from gputop.core.fleet.read import read_fleet
from gputop.core.history.prometheus_report import report_promql
from gputop.core.history.report import ReportBy
from gputop.core.prometheus import answer as decoding
from gputop.core.prometheus.auth import server_for

Items = list[dict[str, Any]]
ANSWERS: dict[str, Callable[[], Items]] = {}
"""What each query answers, by its name (``refresh_queries``' and ``report_promql``')."""
NAMES = {promql: name for name, promql in refresh_queries("").items()}
NAMES.update({promql: name for by in ReportBy for name, promql in report_promql(by).items()})


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        asked = urlparse(self.path)
        promql = parse_qs(asked.query).get("query", [""])[0]
        answer = ANSWERS.get(NAMES.get(promql, ""), list)
        kind = "matrix" if asked.path.endswith("query_range") else "vector"
        body = json.dumps(
            {"status": "success", "data": {"resultType": kind, "result": answer()}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(decoding, "MAX_TARGET_SERIES", 20)
    monkeypatch.setattr(decoding, "MAX_SERIES", 200)
    ANSWERS.clear()
    yield
    ANSWERS.clear()


def up(targets: list[str]) -> Items:
    return [{"metric": {"job": "dcgm", "instance": t}, "value": [1000, "1"]} for t in targets]


def cards(instance: str, count: int, metric: str = "DCGM_FI_DEV_FB_USED") -> Items:
    return [
        {
            "metric": {
                "__name__": metric,
                "job": "dcgm",
                "instance": instance,
                "gpu": str(n),
                "UUID": f"GPU-{instance}-{n}",
                "Hostname": instance,
            },
            "value": [1000, "100"],
        }
        for n in range(count)
    ]


def test_a_flooding_target_spends_nothing_of_the_others_bound(url: str) -> None:
    """20 nodes of 5 cards (100 series) and one target of 21 cards in the cards' labels and
    of 20, just under its own bound, in each of three answers more: all but its 21 were
    counted before, 160 more of the bound of 200, and the refresh was refused."""
    nodes = [f"n{k}:9400" for k in range(20)]
    ANSWERS["up"] = lambda: up([*nodes, "evil:9400"])
    honest = [card for node in nodes for card in cards(node, 5)]
    ANSWERS["card_labels"] = lambda: honest + cards("evil:9400", 21)
    for name in ("nodes", "cards", "processes"):
        ANSWERS[name] = lambda: cards("evil:9400", 20, "gputop_user_gpus")
    fleet = read_fleet(server_for(url))
    assert sorted(node.instance for node in fleet.nodes) == sorted(nodes)
    assert fleet.flooded == {("dcgm", "evil:9400"): 21}
    assert fleet.gpu_count == 100


def test_ten_flooding_targets_hide_no_node(url: str) -> None:
    """Ten targets of 21 cards each: 200 series counted of them before, the whole bound."""
    evil = [f"evil{k}:9400" for k in range(10)]
    ANSWERS["up"] = lambda: up(["good:9400", *evil])
    ANSWERS["card_labels"] = lambda: cards("good:9400", 2) + [c for e in evil for c in cards(e, 21)]
    fleet = read_fleet(server_for(url))
    assert [node.instance for node in fleet.nodes] == ["good:9400"]
    assert sorted(instance for _, instance in fleet.flooded) == evil
    assert all(series == 21 for series in fleet.flooded.values())


def range_series(user: str, instance: str, count: int) -> Items:
    now = time.time()
    return [
        {
            "metric": {"user": user, "Hostname": instance, "gpu": str(n), "job": "dcgm"}
            | {"instance": instance},
            "values": [[now - 60, "1000"], [now - 30, "1000"]],
        }
        for n in range(count)
    ]


def test_a_report_leaves_a_flooding_targets_series_out_of_every_figure(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that labels the report's sums by target: one floods the processes' answer;
    its memory, read before, was still in the report that said it was left out."""
    ANSWERS["memory"] = lambda: (
        range_series("alice", "a:9400", 2) + range_series("mallory", "evil:9400", 3)
    )
    ANSWERS["processes"] = lambda: (
        range_series("alice", "a:9400", 2) + range_series("mallory", "evil:9400", 21)
    )
    code = main(["report", "--prometheus", url, "--since", "1h", "--by", "user", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    users = [row["key"] for row in json.loads(out)["rows"]]
    assert users == ["alice"], out
    assert "evil:9400 left out: over 20 series in one answer; the report is of the others." in err
