"""One target flooding a fleet refresh past its series bound (found by attacking it): an
exporter exporting 100,000 cards made every refresh "answered more than 200,000 series in
all for this refresh: narrow the nodes with --match", with nothing saying which target to
narrow away. The refusal now names the target most of the answer's last run came from, with
the ``--match`` that leaves it out. A real HTTP server on loopback, the bound made small;
docs/fleet.md."""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gputop.core.fleet.queries import check_selector
from gputop.core.prometheus import answer as decoding
from gputop.core.prometheus import client

ITEMS: list[dict[str, Any]] = []


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps(
            {"status": "success", "data": {"resultType": "vector", "result": ITEMS}}
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
