"""A process on a lab host whose command line is megabytes long (any user of the host can
start one: Linux takes 128 KiB an argument, about 2 MB in all). The agent sent it whole, or
redacted but its paths kept, in every snapshot: two such processes were 4 MB a second, and
the lab dropped the host as a flood ("more than a gputop agent sends") every 8 s. The agent
now sends a command as the lab reads it, cut to ``MAX_COMMAND_CHARS`` in all."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.scenarios import minimal_gpu
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.core.redact import MAX_COMMAND_CHARS, redact_argv
from gputop.core.remote import host_link, protocol
from gputop.core.remote.agent import for_reader, sent_command
from gputop.core.sampling.nvml_backend import NvmlBackend

PATH_WORD = "/" + "/".join(["zqzqzqzq"] * 13_000)
"""A word the redactor keeps (a path), of 117,000 characters: one argument Linux takes."""
LONG_ARGS = (PATH_WORD,) * 8
FASTEST_INTERVAL_S = 0.2


@pytest.fixture
def long_process() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", *LONG_ARGS],
        stdin=subprocess.DEVNULL,
    )
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def _agent_lines(scenario: Path, count: int) -> list[str]:
    agent = subprocess.Popen(
        [sys.executable, "-m", "gputop", "agent", "--fake", str(scenario), "--interval", "0.2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert agent.stdout is not None
    try:
        snapshots: list[str] = []
        while len(snapshots) < count:
            line = agent.stdout.readline()
            assert line, "the agent ended"
            if line.startswith('{"type":"snapshot"'):
                snapshots.append(line)
        return snapshots
    finally:
        agent.kill()
        agent.wait()


def test_a_process_with_a_command_of_megabytes_keeps_the_agent_under_the_flood_bound(
    tmp_path: Path, long_process: subprocess.Popen[bytes]
) -> None:
    scenario = tmp_path / "long.json"
    process = {"pid": long_process.pid, "used_memory_mib": 100, "type": "C"}
    scenario.write_text(json.dumps({"gpus": [minimal_gpu(processes=[process])]}))

    lines = _agent_lines(scenario, 2)

    per_window = host_link.FLOOD_WINDOW_S / FASTEST_INTERVAL_S
    for line in lines:
        # before: 937 KB a snapshot, 47 MB in 10 s at 0.2 s (over the 32 MiB a flood is)
        assert len(line.encode()) * per_window < host_link.FLOOD_BYTES / 8, len(line)
        snapshot = protocol.snapshot_from_json(protocol.decode(line).body["snapshot"])
        (shown,) = snapshot.gpus[0].processes
        assert shown.pid == long_process.pid
        program = (sys.executable, "-c", "import time; time.sleep(120)")
        assert shown.command[:3] in (program, redact_argv(program))  # whole, or another's
        assert len(" ".join(shown.command)) <= MAX_COMMAND_CHARS
        assert shown.command[-1].endswith("…")


@pytest.mark.parametrize("reader", ["alice", "root"], ids=["own-whole", "redacted"])
def test_a_command_is_sent_cut_to_the_bound_whether_whole_or_redacted(
    fake_backend: Callable[..., NvmlBackend], reader: str
) -> None:
    snapshot = fake_backend("demo").sample()
    gpu = snapshot.gpus[0]
    short = ("python", "train.py", "--lr", "0.1")
    commands = [("python", "train.py", *LONG_ARGS), short, ("x",) * 100_000]
    processes = tuple(
        replace(gpu.processes[0], pid=100 + n, user="alice", command=command)
        for n, command in enumerate(commands)
    )
    snapshot = replace(snapshot, gpus=(replace(gpu, processes=processes), *snapshot.gpus[1:]))

    shown = [p.command for p in for_reader(snapshot, reader).gpus[0].processes]

    assert shown[0][:2] == ("python", "train.py")
    assert shown[1] == (short if reader == "alice" else redact_argv(short))  # as before
    for command in shown:
        assert len(" ".join(command)) <= MAX_COMMAND_CHARS
        assert len(command) <= protocol.MAX_ARGS


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(max_size=3000) | st.sampled_from(["--token", "hf_" + "a1B2" * 10, "x"])),
    st.booleans(),
)
def test_any_command_is_sent_within_the_bound_as_a_prefix_of_what_was_sent_before(
    command: list[str], whole: bool
) -> None:
    before = tuple(command) if whole else redact_argv(command)
    sent = sent_command(tuple(command), whole)
    assert len(" ".join(sent)) <= MAX_COMMAND_CHARS
    if sent != before:  # cut: every argument as before, the last one's start and an ellipsis
        assert sent[:-1] == before[: len(sent) - 1]
        assert sent[-1].endswith("…")
        assert before[len(sent) - 1].startswith(sent[-1][:-1])
