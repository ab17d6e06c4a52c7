"""The agent's line protocol and the schema-1 document read back into the model."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from gputop.core.remote.protocol import ProtocolError, decode, encode, snapshot_from_json
from gputop.core.snapshot_json import snapshot_to_json


@pytest.mark.parametrize("scenario", ["v100x4", "dgx-h100", "mig", "faulty", "mixed"])
def test_a_snapshot_read_back_from_its_document_writes_the_same_document(
    fake_backend, scenario: str
) -> None:
    document = snapshot_to_json(fake_backend(scenario).sample())

    assert snapshot_to_json(snapshot_from_json(document)) == document


def test_a_document_of_another_schema_is_refused() -> None:
    with pytest.raises(ProtocolError, match="schema 2 is not 1"):
        snapshot_from_json({"schema": 2, "gpus": []})


def test_a_field_of_the_wrong_type_is_named_in_the_error(fake_backend) -> None:
    document = snapshot_to_json(fake_backend("v100x4").sample())
    document["gpus"][1]["memory_used_bytes"] = "lots"

    with pytest.raises(ProtocolError, match=r"gpus\[1\]\.memory_used_bytes is not a whole number"):
        snapshot_from_json(document)


def test_a_line_is_one_compact_json_object_with_its_type() -> None:
    line = encode("jobs", jobs=[], error=None)

    assert line == '{"type":"jobs","jobs":[],"error":null}\n'
    assert decode(line).type == "jobs"


@pytest.mark.parametrize("line", ["Welcome to gpu1!", "[1, 2]", '{"kind": "x"}'])
def test_a_line_that_is_not_a_typed_object_is_a_protocol_error(line: str) -> None:
    with pytest.raises(ProtocolError):
        decode(line)


def test_agent_streams_hello_snapshots_and_jobs_and_exits_when_stdin_closes(tmp_path) -> None:
    agent = subprocess.Popen(
        [sys.executable, "-m", "gputop", "agent", "--fake", "v100x4", "--interval", "0.2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "GPUTOP_STATE_DIR": str(tmp_path / "state")},
    )
    assert agent.stdout is not None and agent.stdin is not None
    lines = [json.loads(agent.stdout.readline()) for _ in range(4)]

    agent.stdin.close()
    closed_at = time.monotonic()
    rest = agent.stdout.read()
    exit_code = agent.wait(10)

    assert [line["type"] for line in lines] == ["hello", "snapshot", "jobs", "snapshot"]
    assert (lines[0]["protocol"], lines[0]["mode"]) == (1, "full")
    assert lines[2] == {"type": "jobs", "jobs": [], "error": None}
    assert len(lines[1]["snapshot"]["gpus"]) == 4
    assert exit_code == 0, agent.stderr.read() if agent.stderr else ""
    assert time.monotonic() - closed_at < 5  # promptly, not at some later timeout
    assert all(json.loads(line)["type"] == "snapshot" for line in rest.splitlines())


def test_agent_that_cannot_sample_sends_one_error_line(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gputop", "agent", "--fake", str(tmp_path / "missing.json")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "GPUTOP_STATE_DIR": str(tmp_path / "state")},
        timeout=30,
    )

    (line,) = result.stdout.decode().splitlines()
    assert json.loads(line)["type"] == "error"
    assert "missing.json" in json.loads(line)["message"]
    assert result.returncode != 0


@pytest.mark.parametrize("interval", ["inf", "1e999", "\u0663", "nan", "0.1"])
def test_an_agent_interval_no_clock_reaches_is_refused_before_the_first_line(
    interval: str, tmp_path
) -> None:
    # 'gputop agent --interval inf' (stdin open, as over ssh) sent its hello and first
    # snapshot, then ended in "internal error: OverflowError: timestamp out of range" and a
    # "Fatal Python error" (exit 134); '--interval ٣' was taken as 3 seconds.
    agent = subprocess.run(
        [sys.executable, "-m", "gputop", "agent", "--fake", "v100x4", "--interval", interval],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "GPUTOP_STATE_DIR": str(tmp_path / "state")},
        check=False,
    )

    assert agent.returncode == 2, agent.stderr
    assert agent.stdout == ""
    assert "argument --interval" in agent.stderr and "from 0.2 to 3600" in agent.stderr
    assert "internal error" not in agent.stderr and "Fatal" not in agent.stderr
