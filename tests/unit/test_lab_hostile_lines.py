"""Lines no decoder can take whole: nested deeper than Python's recursion allows, numbers of
hundreds of digits. Each is that line's fault, said in the host's status; nothing raises out
of the reader of a host, of the lab's history answers, or of the agent's request reader."""

from __future__ import annotations

import io
import json

import pytest
from helpers.hostile_hosts import NOW, agent_lines, good_document, raw_line, replay
from helpers.waiting import wait_for

from gputop.core.remote import agent_history
from gputop.core.remote.agent_history import HistoryRequests, answer, answer_from_json
from gputop.core.remote.host_feed import HostFeed
from gputop.core.remote.host_link import HostLink
from gputop.core.remote.protocol import (
    MAX_TEXT_CHARS,
    ProtocolError,
    decode,
    snapshot_from_json,
)
from gputop.core.remote.status import LinkState

DEEP = 100_000
NESTED_SNAPSHOT = '{"type":"snapshot","snapshot":' + "[" * DEEP + "]" * DEEP + "}\n"
HUGE = 10**400  # 401 digits: a whole number JSON reads, beyond any float


@pytest.mark.parametrize(
    "line", ["[" * DEEP, '{"a":' * DEEP, NESTED_SNAPSHOT], ids=["list", "object", "snapshot"]
)
def test_a_line_nested_too_deeply_is_a_protocol_error(line: str) -> None:
    with pytest.raises(ProtocolError, match="nested too deeply"):
        decode(line)


def test_a_nested_line_is_an_unreadable_line_of_that_host_said_in_its_status() -> None:
    hello, snapshot, jobs = agent_lines(good_document())

    before = replay("gpu1", [hello, NESTED_SNAPSHOT, "[" * DEEP + "\n"])
    after = replay("gpu1", [hello, NESTED_SNAPSHOT, snapshot, jobs])

    assert before.state is LinkState.CONNECTING
    assert before.unreadable_lines == 2
    assert "nested too deeply" in before.describe()
    assert after.state is LinkState.LIVE and after.snapshot is not None
    assert "1 unreadable line (not JSON: nested too deeply" in after.describe()


@pytest.mark.parametrize(
    "path",
    [("timestamp",), ("gpus", 0, "power_w"), ("gpus", 0, "power_limit_w"), ("gpus", 0, "index")],
    ids=lambda path: ".".join(map(str, path)),
)
def test_a_number_of_401_digits_is_an_impossible_value_or_an_unreadable_line(
    path: tuple[object, ...],
) -> None:
    document = good_document()
    place = document
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = HUGE

    status = replay("gpu1", agent_lines(document))

    assert status.impossible_values + status.unreadable_lines >= 1
    assert "1" * 50 not in status.describe() and "0" * 50 not in status.describe()
    if status.snapshot is not None and path[-1] == "power_w":
        assert status.snapshot.gpus[0].power_w is None


def test_a_snapshot_document_with_a_huge_float_field_is_read_as_out_of_range() -> None:
    document = good_document()
    document["gpus"][0]["power_w"] = HUGE

    snapshot = snapshot_from_json(document)

    assert snapshot.gpus[0].power_w == float("inf")  # host_values then refuses it


def test_a_history_answer_with_huge_or_nested_numbers_reads_them_as_unknown() -> None:
    row = {
        "key": "alice",
        "gpu_seconds": HUGE,
        "idle_held_seconds": 5,
        "mean_memory_bytes": HUGE,
        "peak_memory_bytes": 1e300,
        "mean_sm_util": -HUGE,
    }
    series = {
        "physical_index": 0,
        "utilization_percent": [HUGE, 50],
        "memory_used_bytes": [1, HUGE],
        "memory_total_bytes": HUGE,
    }
    good_row = {**row, "gpu_seconds": 10.0}

    read = answer_from_json({"report": {"rows": [row, good_row]}, "series": series})

    assert read.rows is not None and len(read.rows) == 1  # the row without its gpu-seconds
    (kept,) = read.rows
    assert (kept.gpu_seconds, kept.mean_memory_bytes, kept.mean_sm_util) == (10.0, None, None)
    assert read.series is not None
    assert read.series.utilization_percent == (None, 50.0)
    assert read.series.memory_total_bytes is None


def test_a_history_answers_texts_are_cut_where_decoded() -> None:
    """Kept whole, a row's key of megabytes was cleaned and drawn in the card history (H)."""
    long = "\x1b[2J" * 1_000_000
    row = {"key": long, "gpu_seconds": 1, "idle_held_seconds": 0, "user": long, "command": long}

    (kept,) = answer_from_json({"report": {"rows": [row]}}).rows or ()
    refused = answer_from_json({"error": long})

    assert {len(kept.key), len(kept.user or ""), len(kept.command or "")} == {MAX_TEXT_CHARS}
    assert len(refused.error or "") == MAX_TEXT_CHARS


def test_the_agent_answers_a_request_with_huge_numbers_with_an_error_line(tmp_path) -> None:
    request = {"id": 1, "window_s": HUGE, "by": "user", "physical_index": None}

    line = json.loads(answer(request, NOW, tmp_path / "history.sqlite3"))

    assert line["type"] == "history" and line["id"] == 1
    assert line["report"] is None and "window_s" in line["error"]


def test_the_agents_request_reader_skips_a_nested_line_and_reads_on() -> None:
    nested = "[" * (agent_history.MAX_REQUEST_BYTES - 1)  # deeper than the recursion limit
    good = raw_line("history_request", id=7, window_s=60, by="user", physical_index=None)
    stream = io.BytesIO((nested + "\n" + good).encode())

    requests = HistoryRequests(stream)

    wait_for(requests.closed.is_set, "the reader to reach the end of its stream")
    assert [request["id"] for request in requests.pending()] == [7]


def test_the_agent_answers_a_request_whose_by_is_a_list_with_an_error_line(tmp_path) -> None:
    request = {"id": 2, "window_s": 60, "by": ["user"], "physical_index": None}

    line = json.loads(answer(request, NOW, tmp_path / "history.sqlite3"))

    assert line["report"] is None and "'by' must be" in line["error"]


def _fake_ssh(tmp_path, lines: list[str]) -> dict[str, str]:
    """An ``ssh`` on PATH that prints ``lines`` as a host's agent would, then ends."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "out").write_text("".join(lines))
    script = bin_dir / "ssh"
    script.write_text(f"#!/bin/sh\ncat {tmp_path / 'out'}\nexit 1\n")
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_a_host_that_sends_a_nested_line_is_said_and_tried_again(tmp_path) -> None:
    hello, _, _ = agent_lines(good_document())
    environ = _fake_ssh(tmp_path, [hello, NESTED_SNAPSHOT])
    link = HostLink("gpu1", environ=environ, first_retry_s=30.0).start()
    try:
        assert link.wait_for(lambda s: s.state is LinkState.UNREACHABLE, 20), link.status()
        status = link.status()
    finally:
        link.stop()

    assert status.unreadable_lines == 1
    assert "nested too deeply" in status.describe()
    assert status.retry_in_s is not None and status.retry_in_s > 0


def test_a_reader_that_breaks_drops_the_connection_says_so_and_backs_off(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: HostFeed, line: str) -> None:
        raise RuntimeError("a fault no decoder foresaw")

    monkeypatch.setattr(HostFeed, "feed", broken)
    hello, _, _ = agent_lines(good_document())
    environ = _fake_ssh(tmp_path, [hello])
    link = HostLink("gpu1", environ=environ, first_retry_s=0.05, max_retry_s=30.0).start()
    try:
        assert link.wait_for(
            lambda s: s.state is LinkState.UNREACHABLE and (s.retry_in_s or 0) > 0.1, 20
        ), link.status()
        status = link.status()
    finally:
        link.stop()

    assert status.failure is not None and status.failure.kind == "unreadable"
    assert "could not be read (RuntimeError)" in status.describe()
    assert "retrying in" in status.describe()
