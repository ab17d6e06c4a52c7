"""One target flooding a fleet refresh past its series bound (found by attacking it): an
exporter exporting 100,000 cards made every refresh "answered more than 200,000 series in
all for this refresh: narrow the nodes with --match", with nothing saying which target to
narrow away. The refusal now names the target most of the answer's last run came from, with
the ``--match`` that leaves it out; and a target past its own bound (``MAX_TARGET_SERIES``)
is left out, the others read.

A target left out for a flood of series costs the others nothing (found by attacking the
first version of it): its first series stayed counted in the refresh's bound of all series,
in every answer it filled to just under its own bound, so one such target took 80,000 of
the 200,000 and ten took all of them (no node shown, the failure the bound of one target
was made for). And ``report --prometheus`` said a target was left out while its series
read before the flood stayed in the report.

A real HTTP server on loopback, answering each query by its name (or ``ITEMS``); the bounds
made small. docs/fleet.md."""

from __future__ import annotations

import json
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from gputop.cli.main import main
from gputop.core.fleet.queries import check_selector, refresh_queries
from gputop.core.fleet.read import read_fleet
from gputop.core.history.prometheus_report import report_promql
from gputop.core.history.report import ReportBy
from gputop.core.prometheus import answer as decoding
from gputop.core.prometheus import client
from gputop.core.prometheus.auth import server_for

Items = list[dict[str, Any]]
ITEMS: Items = []
"""What a query answers where ``ANSWERS`` has nothing for it."""
ANSWERS: dict[str, Callable[[], Items]] = {}
"""What each query answers, by its name (``refresh_queries``' and ``report_promql``')."""
NAMES = {promql: name for name, promql in refresh_queries("").items()}
NAMES.update({promql: name for by in ReportBy for name, promql in report_promql(by).items()})


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        asked = urlparse(self.path)
        promql = parse_qs(asked.query).get("query", [""])[0]
        answer = ANSWERS.get(NAMES.get(promql, ""))
        kind = "matrix" if asked.path.endswith("query_range") else "vector"
        result = answer() if answer is not None else ITEMS
        body = json.dumps(
            {"status": "success", "data": {"resultType": kind, "result": result}}
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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def series(instance: str, count: int) -> list[dict[str, Any]]:
    return [
        {"metric": {"job": "dcgm", "instance": instance, "gpu": str(n)}, "value": [1, "1"]}
        for n in range(count)
    ]


def refusal(url: str) -> str:
    with pytest.raises(client.PrometheusError) as raised:
        client.query(url, "up", client.Budget(what="refresh", advice="narrow the nodes"))
    return str(raised.value)


def test_the_target_most_series_came_from_is_named_with_the_match_that_leaves_it_out(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(decoding, "MAX_SERIES", 100)
    hostile = 'evil"\x1b[2J:9400'
    ITEMS[:] = series("gpu1:9400", 8) + series(hostile, 150)
    said = refusal(url)
    assert said.startswith("Prometheus at") and "narrow the nodes" in said
    assert "\x1b" not in said and "(job 'dcgm')" in said
    matcher = said.split("which --match ", 1)[1].removesuffix(" leaves out.")
    (selector,) = shlex.split(matcher)
    assert check_selector(selector) == 'instance!="evil\\"\\u001b[2J:9400"'


def test_no_target_is_named_where_none_sent_most(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decoding, "MAX_SERIES", 100)
    ITEMS[:] = [one for n in range(60) for one in series(f"gpu{n}:9400", 2)]
    assert "most came from" not in refusal(url)


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(decoding, "MAX_TARGET_SERIES", 20)
    monkeypatch.setattr(decoding, "MAX_SERIES", 200)
    ANSWERS.clear()
    ITEMS.clear()  # what the queries not answered by name give: nothing
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


def test_a_flooding_target_spends_nothing_of_the_others_bound(url: str, small_bounds: None) -> None:
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


def test_ten_flooding_targets_hide_no_node(url: str, small_bounds: None) -> None:
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
    url: str, capsys: pytest.CaptureFixture[str], small_bounds: None
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
