"""One series of more than a megabyte among a Prometheus server's answers (found by
attacking it): any target Prometheus scrapes may export a label of megabytes (Prometheus's
``label_value_length_limit`` is unset by default, and it stores and serves the label as it
came), and that one series made the whole fleet refresh, ``snapshot``/``pick --prometheus``
and ``gputop report --prometheus`` fail with "did not answer as Prometheus's API does (a
value of more than a megabyte)": every other node hidden by one. Now the series is passed
over unread (gputop/core/prometheus/stream.py, ``Stream.skip``), counted, and said; the
others are read. A real HTTP server on loopback answers each case. docs/security.md, "A
hostile Prometheus".
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.cli.main import main
from gputop.core.prometheus import client
from gputop.core.prometheus.answer import Budget
from gputop.core.prometheus.stream import Stream

MIB = 1 << 20
NOW = time.time()
# Quotes, backslashes and brackets inside the label: the skip must not end inside it.
HUGE = 'x\\"]}{["' + "y" * (2 * MIB) + '\\\\"'


class Handler(BaseHTTPRequestHandler):
    server: Server

    def do_GET(self) -> None:
        params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        body = json.dumps(self.server.answer(params)).encode()
        with contextlib.suppress(OSError):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.answer: Callable[[dict[str, str]], Any] = lambda params: {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server()
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    yield running
    running.shutdown()
    running.server_close()
    thread.join(timeout=10)


def vector(items: list[tuple[dict[str, str], str]]) -> dict[str, Any]:
    result = [{"metric": labels, "value": [NOW, value]} for labels, value in items]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def matrix(items: list[tuple[dict[str, str], list[list[Any]]]]) -> dict[str, Any]:
    result = [{"metric": labels, "values": values} for labels, values in items]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def test_an_instant_answer_reads_every_series_but_the_one_too_large(server: Server) -> None:
    server.answer = lambda params: vector(
        [({"gpu": "0"}, "1"), ({"gpu": "1", "pod": HUGE}, "2"), ({"gpu": "2"}, "3")]
    )
    budget = Budget()
    samples = client.query(server.url, "up", budget)
    assert [(s.labels, s.value) for s in samples] == [({"gpu": "0"}, 1.0), ({"gpu": "2"}, 3.0)]
    assert budget.passed_over == 1


def test_a_range_answer_reads_every_series_but_the_one_too_large(server: Server) -> None:
    points = [[NOW - 60, "1"], [NOW, "2"]]
    server.answer = lambda params: matrix(
        [({"user": "a"}, points), ({"user": HUGE}, points), ({"user": "b"}, points)]
    )
    budget = Budget()
    series = client.query_range(server.url, "x", NOW - 60, NOW, 60.0, budget)
    assert [s.labels for s in series] == [{"user": "a"}, {"user": "b"}]
    assert list(series[1].values) == [1.0, 2.0]
    assert budget.passed_over == 1


def fleet_answer(huge_on: str) -> Callable[[dict[str, str]], Any]:
    """Two dcgm-exporter nodes, one card each; node ``huge_on``'s card has a label of 2 MiB."""

    def labels(instance: str, name: str) -> dict[str, str]:
        one = {"job": "dcgm", "instance": instance, "__name__": name, "gpu": "0"}
        one |= {"UUID": f"GPU-{instance}", "Hostname": instance.split(":")[0]}
        return one | ({"modelName": HUGE} if instance == huge_on else {})

    nodes = ["good:9400", huge_on]

    def answer(params: dict[str, str]) -> Any:
        query = params["query"]
        targets = [{"job": "dcgm", "instance": node} for node in nodes]
        if query.startswith("up"):
            return vector([(target, "1") for target in targets])
        if query.startswith(("timestamp(", "max_over_time(")):
            return vector([(target, str(NOW)) for target in targets])
        if query.startswith("count_over_time("):
            return vector([(target, "9") for target in targets])
        if "DCGM_FI_DEV_FB_USED|" in query:
            return vector([(labels(node, "DCGM_FI_DEV_FB_USED"), "10") for node in nodes])
        if "DCGM_FI_DEV_FB_FREE" in query:
            figures = [("DCGM_FI_DEV_FB_FREE", "80000"), ("DCGM_FI_DEV_GPU_UTIL", "0")]
            return vector([(labels(node, name), v) for node in nodes for name, v in figures])
        return vector([])

    return answer


def test_the_fleet_shows_every_other_node_and_says_what_it_passed_over(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    server.answer = fleet_answer("hostile:9400")
    code = main(["snapshot", "--prometheus", server.url])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "3 series of over 1 MiB passed over" in out.splitlines()[0]  # its card's three
    assert any(line.startswith("good ") and "1/1" in line for line in out.splitlines())
    assert main(["snapshot", "--prometheus", server.url, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["summary"]["series_passed_over"] == 3
    good = next(node for node in document["nodes"] if node["host"] == "good")
    assert good["gpus"][0]["free"] is True
    assert main(["pick", "--prometheus", server.url]) == 0
    assert capsys.readouterr().out.split()[0] == "good"


def test_the_report_shows_every_other_holder_and_says_what_it_passed_over(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    def answer(params: dict[str, str]) -> Any:
        start, end = float(params["start"]), float(params["end"])
        step = float(params["step"])
        times = [start + k * step for k in range(int((end - start) / step) + 1)]
        value = "30" if "sm_util" in params["query"] else str(1 << 30)
        points = [[t, value] for t in times]
        if params["query"].startswith("count by") or "DCGM_FI_PROF" in params["query"]:
            return matrix([])
        holders = [{"user": "alice"}, {"user": HUGE}, {"user": "bob"}]
        return matrix([(one | {"Hostname": "h", "gpu": "0"}, points) for one in holders])

    server.answer = answer
    hour = ["--since", "2026-01-01T00:00:00Z", "--until", "2026-01-01T01:00:00Z"]
    code = main(["report", "--prometheus", server.url, *hour, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert sorted(row["key"] for row in json.loads(out)["rows"]) == ["alice", "bob"]
    assert "passed over" in err and len(err) < 300


@settings(max_examples=200, deadline=None)
@given(
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(10**20), 10**20)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(alphabet=st.sampled_from(list('ab"\\[]{},: \n\u00e9')), max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(alphabet='a"\\[{', max_size=3), inner, max_size=4)
        ),
        max_leaves=20,
    ),
    size=st.integers(1, 7),
)
def test_skipping_a_value_ends_where_decoding_it_ends(value: object, size: int) -> None:
    """Read in chunks of ``size`` bytes, a value is passed over to exactly where the decoder
    ends it: the next value is read as it is."""
    text = json.dumps(value, ensure_ascii=False) + ' , "next"'
    data = text.encode()
    chunks = iter([data[at : at + size] for at in range(0, len(data), size)])
    stream = Stream(lambda: next(chunks, b""))
    stream.skip()
    assert stream.peek() == ","
    stream.at += 1
    assert stream.value() == "next"


def test_a_label_of_escapes_is_passed_over_as_fast_as_one_of_letters() -> None:
    """Prometheus writes a backslash of a label as two: 16 MiB of them cost 40 times what
    16 MiB of letters did when each escape was looked at one by one (about 3 s)."""

    def seconds_to_skip(inside: bytes) -> float:
        body = b'"' + inside * ((16 << 20) // len(inside)) + b'" , "next"'
        chunks = iter([body[at : at + 65536] for at in range(0, len(body), 65536)])
        stream = Stream(lambda: next(chunks, b""))
        started = time.perf_counter()
        stream.skip()
        took = time.perf_counter() - started
        assert stream.peek() == ","
        return took

    letters = min(seconds_to_skip(b"x") for _ in range(3))
    escapes = min(seconds_to_skip(b"\\\\") for _ in range(3))
    assert escapes < 5 * letters + 0.05
