"""``gputop report --prometheus`` against a hostile Prometheus: a real HTTP server on loopback.

Each test sets what the server answers to ``/api/v1/query_range`` (deep nesting, numbers and
labels of thousands of digits, 1e300 bytes, points outside the window, a byte every half
second, a 50 MB error, more bytes than the report may hold) and runs ``gputop report`` as a
person does. Every case ends in figures that are right or in a one-line message and a
non-zero exit, never an internal error. See docs/security.md, "A hostile Prometheus".
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

from gputop.cli.main import main
from gputop.core.prometheus import answer as prometheus_answer

GIB = 1 << 30
HOUR = ("--since", "2026-01-01T00:00:00Z", "--until", "2026-01-01T01:00:00Z")
HOUR_START = 1767225600.0

Answer = Callable[["Handler", dict[str, str]], None]


class Handler(BaseHTTPRequestHandler):
    server: FakePrometheus

    def do_GET(self) -> None:
        parts = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(parts.query))
        self.server.requests.append(params)
        with contextlib.suppress(OSError):  # the report hung up (its deadline, its bound)
            self.server.answer(self, params)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_json(self, document: object, status: int = 200) -> None:
        self.send_body(json.dumps(document).encode(), status)

    def send_body(self, body: bytes, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class FakePrometheus(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.answer: Answer = lambda handler, params: handler.send_json({})
        self.requests: list[dict[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakePrometheus]:
    server = FakePrometheus()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture
def server(fake_server: FakePrometheus) -> FakePrometheus:
    fake_server.requests = []
    return fake_server


def matrix(series: list[tuple[dict[str, str], list[list[Any]]]]) -> dict[str, Any]:
    result = [{"metric": labels, "values": values} for labels, values in series]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def figure(params: dict[str, str]) -> str:
    """Which of the report's six queries this is (prometheus_report.report_promql)."""
    query = params["query"]
    if "DCGM_FI_PROF_SM_ACTIVE" in query:
        return "sm_active"
    if "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" in query:
        return "tensor_active"
    if query.startswith("count by") and " and on " in query:
        return "idle"
    if query.startswith("count by"):
        return "processes"
    return "sm" if "sm_util" in query else "memory"


def grid(params: dict[str, str]) -> list[float]:
    """The evaluation times Prometheus answers at: start, start + step, ... up to end."""
    start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
    count = int((end - start) / step + 1e-9)
    return [start + k * step for k in range(count + 1)]


def holders(values: dict[str, str], labels: list[dict[str, str]], extra: Any = None) -> Answer:
    """Every holder in ``labels`` present at every step with ``values`` per figure; no idle
    series unless ``values`` has one. ``extra(params)`` adds points to each series."""

    def answer(handler: Handler, params: dict[str, str]) -> None:
        name = figure(params)
        if name not in values:
            handler.send_json(matrix([]))
            return
        points = [[t, values[name]] for t in grid(params)]
        if extra is not None:
            points += [[t, values[name]] for t in extra(params)]
        handler.send_json(matrix([(dict(one), points) for one in labels]))

    return answer


def report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["report", *args])
    out, err = capsys.readouterr()
    assert "internal error" not in err and "Traceback" not in err
    return code, out, err


def rows_of(out: str) -> dict[Any, dict[str, Any]]:
    return {row["key"]: row for row in json.loads(out)["rows"]}


ALICE = {"user": "alice", "Hostname": "h1", "gpu": "0"}


# -- right figures ---------------------------------------------------------------------------


def test_a_holder_present_all_hour_holds_it_one_hour_not_one_step_more(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    server.answer = holders({"memory": str(GIB), "processes": "1", "sm": "50"}, [ALICE])
    code, out, _ = report(capsys, "--prometheus", server.url, *HOUR, "--json")
    assert code == 0
    alice = rows_of(out)["alice"]
    assert alice["gpu_seconds"] == 3600.0  # 241 points 15 s apart: 240 steps, not 241
    assert alice["mean_memory_bytes"] == GIB and alice["mean_sm_util"] == 50.0
    assert [float(r["step"]) for r in server.requests] == [15.0] * 6


def test_points_outside_the_window_and_extra_points_inside_count_nothing_more(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    def extra(params: dict[str, str]) -> list[float]:
        start, end = float(params["start"]), float(params["end"])
        days = 17 * 86400
        outside = [start - days + k * 3600 for k in range(17 * 24)]
        outside += [end + 1 + k * 3600 for k in range(17 * 24)]
        dense = [start + 0.25 * k for k in range(1, 2000)]  # four a second, 8 minutes
        return outside + dense

    server.answer = holders({"memory": str(GIB), "processes": "1"}, [ALICE], extra)
    code, out, _ = report(capsys, "--prometheus", server.url, *HOUR, "--json")
    assert code == 0
    assert rows_of(out)["alice"]["gpu_seconds"] == pytest.approx(3600.0)


def test_memory_of_1e300_bytes_over_months_is_unknown_never_an_overflow(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    bob = {"user": "bob", "Hostname": "h1", "gpu": "1"}

    def answer(handler: Handler, params: dict[str, str]) -> None:
        values = dict.fromkeys(
            ("memory", "processes", "sm", "idle", "sm_active", "tensor_active"), "1e300"
        )
        points = [[t, values[figure(params)]] for t in grid(params)]
        fine = [
            [t, "1000000000000000" if figure(params) == "memory" else "1"] for t in grid(params)
        ]
        handler.send_json(matrix([(ALICE, points), (bob, fine)]))

    server.answer = answer
    window = ("--since", "2026-01-01", "--until", "2026-12-31", "--idle-min", "1h")
    code, out, _ = report(capsys, "--prometheus", server.url, *window, "--json")
    assert code == 0
    rows = rows_of(out)
    alice, bob_row = rows["alice"], rows["bob"]
    assert alice["mean_memory_bytes"] is None and alice["peak_memory_bytes"] is None
    assert alice["mean_sm_util"] == 100.0  # capped, as for the store
    assert alice["idle_held_seconds"] == 0.0  # a count of 1e300 processes is unknown
    assert alice["mean_sm_active_percent"] is None  # a ratio of 1e300: unknown
    assert bob_row["peak_memory_bytes"] == 10**15  # under 1 PiB: kept
    assert bob_row["mean_memory_bytes"] == pytest.approx(10**15, rel=1e-9)
    assert alice["gpu_seconds"] == pytest.approx(364 * 86400.0)
    code, out, _ = report(capsys, "--prometheus", server.url, *window)
    assert code == 0 and len(max(out.split(), key=len)) < 40  # no 300-digit figure


IMPOSSIBLE_RATIOS = ("NaN", "-0.25", "1.5", "1e300", "+Inf", "-Inf")


def test_activity_is_a_ratio_0_to_1_and_anything_else_is_unknown_never_a_figure(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    """``DCGM_FI_PROF_SM_ACTIVE`` and ``…PIPE_TENSOR_ACTIVE`` are ratios: NaN, infinities,
    negatives and anything above 1 are unknown at that step (the mean is of the rest), and a
    card with nothing else is null, never 0 or 1e302 %."""
    bob = {"user": "bob", "Hostname": "h1", "gpu": "1"}
    card_0, card_1 = {"Hostname": "h1", "gpu": "0"}, {"Hostname": "h1", "gpu": "1"}

    def answer(handler: Handler, params: dict[str, str]) -> None:
        name, times = figure(params), grid(params)
        bad = [IMPOSSIBLE_RATIOS[k % len(IMPOSSIBLE_RATIOS)] for k in range(len(times))]
        if name == "sm_active":  # card 0: every other step 0.25, the rest impossible
            good = [bad[k] if k % 2 else "0.25" for k in range(len(times))]
            series = [
                (card_0, list(zip(times, good, strict=True))),
                (card_1, list(zip(times, bad, strict=True))),
            ]
        elif name == "tensor_active":
            series = [(card_0, [[t, "1"] for t in times])]
        elif name == "idle":
            series = []
        else:
            value = {"memory": str(GIB), "processes": "1", "sm": "50"}[name]
            series = [(labels, [[t, value] for t in times]) for labels in (ALICE, bob)]
        handler.send_json(
            matrix([(labels, [list(p) for p in points]) for labels, points in series])
        )

    server.answer = answer
    code, out, _ = report(capsys, "--prometheus", server.url, *HOUR, "--json")
    assert code == 0
    rows = rows_of(out)
    assert rows["alice"]["mean_sm_active_percent"] == pytest.approx(25.0)
    assert rows["alice"]["mean_tensor_active_percent"] == 100.0
    assert rows["bob"]["mean_sm_active_percent"] is None
    assert rows["bob"]["mean_tensor_active_percent"] is None  # no series: null, not 0
    code, out, _ = report(capsys, "--prometheus", server.url, *HOUR, "--by", "gpu", "--json")
    by_gpu = rows_of(out)
    assert by_gpu["h1:0"]["mean_sm_active_percent"] == pytest.approx(25.0)
    assert by_gpu["h1:1"]["mean_sm_active_percent"] is None
    code, out, _ = report(capsys, "--prometheus", server.url, *HOUR)
    assert code == 0 and len(max(out.split(), key=len)) < 40  # no 300-digit figure


def test_a_5000_digit_label_is_a_key_as_it_came_never_a_number(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    long = "9" * 5000
    labels = {"pid": long, "user": "alice", "command": "x", "Hostname": "h1", "gpu": "0"}
    server.answer = holders({"memory": str(GIB), "processes": "1"}, [labels])
    code, out, _ = report(capsys, "--prometheus", server.url, *HOUR, "--by", "process", "--json")
    assert code == 0
    assert list(rows_of(out)) == [long]


def test_a_5000_digit_value_is_unknown_and_a_5000_digit_time_is_no_answer(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    server.answer = holders({"memory": "9" * 5000, "processes": "1"}, [ALICE])
    code, out, _ = report(capsys, "--prometheus", server.url, *HOUR, "--json")
    assert code == 0 and rows_of(out)["alice"]["mean_memory_bytes"] is None

    def digits(handler: Handler, params: dict[str, str]) -> None:
        body = '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},'
        body += '"values":[[' + "1" * 5000 + ',"1"]]}]}}'
        handler.send_body(body.encode())

    server.answer = digits
    code, _, err = report(capsys, "--prometheus", server.url, *HOUR)
    assert code == 1 and "did not answer as Prometheus's API does (not JSON)" in err


@pytest.mark.parametrize(
    "where",
    [
        b'{"status":"success","data":%s}',
        b'{"status":"success","data":{"resultType":"matrix","result":[%s]}}',
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":%s}]}}',
    ],
    ids=["data", "series", "labels"],
)
def test_deeply_nested_json_is_no_answer(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str], where: bytes
) -> None:
    nested = where % (b"[" * 200_000 + b"]" * 200_000)
    server.answer = lambda handler, params: handler.send_body(nested)
    code, _, err = report(capsys, "--prometheus", server.url, *HOUR)
    assert code == 1 and "(JSON nested too deeply)" in err


def test_job_rows_are_per_user_and_per_host(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    same_id = [
        {"gputop_job": "1", "user": "alice", "Hostname": "h1", "gpu": "0"},
        {"gputop_job": "1", "user": "bob", "Hostname": "h1", "gpu": "1"},
        {"gputop_job": "1", "user": "alice", "Hostname": "h2", "gpu": "0"},
        {"slurm_job": "7", "user": "carol", "Hostname": "h2", "gpu": "1"},
    ]
    server.answer = holders({"memory": str(GIB), "processes": "1"}, same_id)
    code, out, _ = report(capsys, "--prometheus", server.url, *HOUR, "--by", "job", "--json")
    assert code == 0
    found = {(row["key"], row["user"]) for row in json.loads(out)["rows"]}
    assert found == {
        ("h1:gputop:1", "alice"),
        ("h1:gputop:1", "bob"),
        ("h2:gputop:1", "alice"),
        ("h2:slurm:7", "carol"),
    }
    assert "user" in server.requests[0]["query"]  # summed per user by Prometheus itself
    code, out, _ = report(capsys, "--prometheus", server.url, *HOUR, "--by", "job")
    assert "h1:gputop:1 bob" in out and "h1:gputop:1 alice" in out


# -- bounded: time, memory, messages ---------------------------------------------------------


def trickle(handler: Handler, headers_too: bool) -> None:
    """One byte every half second (of a header, or of the body after whole headers), for up
    to a minute or until the report hangs up."""
    if headers_too:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
        text = b"X-Slow: " + b"a" * 200 + b"\r\n"
    else:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        text = b'{"status":"success","data":{"resultType":"matrix","result":[' + b" " * 900
    handler.wfile.flush()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for byte in text:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.5)


@pytest.mark.parametrize("headers_too", [False, True], ids=["body", "headers"])
def test_a_server_sending_a_byte_every_half_second_is_cut_off_at_the_timeout(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str], headers_too: bool
) -> None:
    server.answer = lambda handler, params: trickle(handler, headers_too)
    started = time.monotonic()
    code, _, err = report(capsys, "--prometheus", server.url, *HOUR, "--timeout", "2")
    took = time.monotonic() - started
    assert code == 1 and "did not answer within --timeout 2 s (for the whole report)" in err
    assert took < 20  # 2 s and the machine's load; without the deadline: a minute or more
    assert len(server.requests) == 1  # the deadline is the report's, not each query's


def test_a_50_mb_error_body_is_cut_to_one_line(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    def huge_error(handler: Handler, params: dict[str, str]) -> None:
        handler.send_response(500)
        handler.send_header("Content-Length", str(50 << 20))
        handler.end_headers()
        line = b"\x1b[31mboom\nsecond line " + b"e" * (1 << 20)
        for _ in range(50):
            handler.wfile.write(line[: 1 << 20])

    server.answer = huge_error
    code, _, err = report(capsys, "--prometheus", server.url, *HOUR)
    assert code == 1 and "answered HTTP 500: " in err
    assert err.count("\n") == 1 and len(err) < 300 and "\x1b" not in err


def test_an_api_error_is_said_in_one_line(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    refusal = {"status": "error", "errorType": "bad_data", "error": "bad\nquery\x1b[2J" * 100}
    server.answer = lambda handler, params: handler.send_json(refusal, status=400)
    code, _, err = report(capsys, "--prometheus", server.url, *HOUR)
    assert code == 1 and "refused the query (HTTP 400): bad query" in err
    assert err.count("\n") == 1 and len(err) < 300 and "\x1b" not in err


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/x", "file:///etc/passwd"])
def test_a_redirect_away_from_http_is_not_followed(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    def redirect(handler: Handler, params: dict[str, str]) -> None:
        handler.send_response(302)
        handler.send_header("Location", target)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    server.answer = redirect
    code, _, err = report(capsys, "--prometheus", server.url, *HOUR)
    assert code == 1 and "answered HTTP 302" in err


def test_the_memory_bound_is_for_all_answers_together(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prometheus_answer, "MAX_TOTAL_BYTES", 1 << 20)
    many = [{**ALICE, "user": f"user{n}"} for n in range(70)]
    server.answer = holders({"memory": str(GIB), "processes": "1", "sm": "1"}, many)
    code, _, err = report(capsys, "--prometheus", server.url, *HOUR)
    assert code == 1 and "answered more than 1 MiB in all for this report" in err
    assert len(server.requests) == 3  # each answer ~0.4 MiB: two fit, the third does not


def test_the_series_bound_is_for_all_answers_together(
    server: FakePrometheus, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prometheus_answer, "MAX_SERIES", 150)
    many = [{**ALICE, "user": f"user{n}"} for n in range(70)]
    server.answer = holders({"memory": str(GIB), "processes": "1", "sm": "1"}, many)
    code, _, err = report(capsys, "--prometheus", server.url, *HOUR)
    assert code == 1 and "answered more than 150 series in all for this report" in err
    assert len(server.requests) == 3  # 70 series each: two answers fit, the third does not


# -- what a person types ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--since", "0001-01-01"), "outside the times gputop reports on"),
        (("--until", "9999-12-31T23:59:59-23:59"), "outside the times gputop reports on"),
        (("--since", "9999-12-31T23:59:59+23:59"), "outside the times gputop reports on"),
        (("--prometheus", "http://[::1"), "Invalid IPv6 URL"),
        (("--prometheus", "http://127.0.0.1:abc"), "give the server's http:// or https://"),
        (("--prometheus", "http://127.0.0.1:99999"), "give the server's http:// or https://"),
        (("--prometheus", "http://h/\x1b[2J"), "no spaces or control characters"),
        (("--prometheus", "http://h:9090/?x=1"), "without ? or #"),
        (("--prometheus", "http://h:9090", "--timeout", "nan"), "--timeout"),
        (("--timeout", "5"), "--timeout goes with --prometheus"),
    ],
)
def test_what_a_person_types_wrong_is_a_message_and_exit_2(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], said: str
) -> None:
    try:
        code = main(["report", *args])
    except SystemExit as exit_:  # argparse's own refusal (a type error)
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and said in err
    assert "internal error" not in err and "\x1b" not in err
