"""A process's environment read that was cut makes its CUDA view unknown, never "unset".

An environment may hold several MiB (128 KiB is Linux's limit for one string, not for all);
gputop reads 256 KiB of it. A real process with 1 MiB of environment and
``CUDA_VISIBLE_DEVICES=1`` at its end, and one whose ``CUDA_VISIBLE_DEVICES`` is longer than
the 4,096 bytes read of a value, are shown as "unknown (environment too large)": not as
seeing every card. Non-UTF-8 bytes in an environment or a command line leave
``snapshot --json`` valid UTF-8. See docs/cuda-visibility.md and docs/security.md,
"A cut environment is unknown".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from helpers.cuda_view import SLEEPER, four_cards, snapshot_processes

from gputop.cli.main import main
from gputop.core.model import GpuProcess, ProcessType, Snapshot
from gputop.core.process_detail import describe_process
from gputop.core.remote.protocol import snapshot_from_json
from gputop.core.sampling.process_env import ENVIRON_LIMIT_BYTES, read_cuda_environment
from gputop.core.snapshot_json import snapshot_to_json

PADDING = 100 * 1024  # one variable, under Linux's 128 KiB per string


def padded(**variables: str) -> dict[str, str]:
    """1.2 MB of padding variables before ``variables``: four times what gputop reads."""
    padding = {f"PADDING_{n:02d}": "x" * PADDING for n in range(12)}
    assert sum(len(v) for v in padding.values()) > 4 * ENVIRON_LIMIT_BYTES
    return {**padding, **variables}


def test_a_cut_read_makes_the_view_unknown_not_unset(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    big = start_process(**padded(CUDA_VISIBLE_DEVICES="1"))
    environ = open(f"/proc/{big.pid}/environ", "rb").read()  # noqa: SIM115
    assert len(environ) > 4 * ENVIRON_LIMIT_BYTES  # the whole of it is over 1 MiB
    assert environ.rstrip(b"\0").endswith(b"CUDA_VISIBLE_DEVICES=1")
    read = read_cuda_environment(big.pid)
    assert read is not None and "CUDA_VISIBLE_DEVICES" in read.cut
    scenario = scenario_file(four_cards({0: [big.pid]}))  # NVML: on GPU 0, which it excludes
    cuda = snapshot_processes(capsys, scenario)[big.pid]["cuda"]
    assert cuda["unknown"] == "environment too large"
    assert cuda["visible_devices"] is None and cuda["devices"] == []  # not "every card"
    assert cuda["mismatch"] is False  # unknown: neither flagged nor cleared by a guess
    shown = _detail(scenario, big.pid)
    assert "Its own CUDA view: unknown (environment too large" in shown
    assert "(unset)" not in shown and "cuda:0" not in shown


def test_the_same_variables_read_whole_are_known(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    both = {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    small = start_process(**both)
    first = start_process(**{**both, **padded()})  # both seen before the cut
    half = start_process(**{"CUDA_VISIBLE_DEVICES": "1", **padded()})  # its order unseen
    scenario = scenario_file(four_cards({0: [small.pid, first.pid, half.pid]}))
    processes = snapshot_processes(capsys, scenario)
    for pid in (small.pid, first.pid):
        cuda = processes[pid]["cuda"]
        assert cuda["unknown"] is None and cuda["devices"] == [1] and cuda["mismatch"] is True
    # which card "1" is depends on CUDA_DEVICE_ORDER, which the cut read did not reach
    assert processes[half.pid]["cuda"]["unknown"] == "environment too large"


def test_a_value_longer_than_the_read_of_a_value_is_unknown(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # cut at 4,096 it would read "0," + blanks + "1": cards [0, 1]; whole, it is [0]
    long = start_process(CUDA_VISIBLE_DEVICES="0," + " " * 4093 + "19")
    scenario = scenario_file(four_cards({1: [long.pid]}))
    cuda = snapshot_processes(capsys, scenario)[long.pid]["cuda"]
    assert cuda["unknown"] == "environment too large" and cuda["devices"] == []


def test_the_unknown_view_travels_to_the_lab_as_unknown(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    big = start_process(**padded(CUDA_VISIBLE_DEVICES="1"))
    scenario = scenario_file(four_cards({0: [big.pid]}))
    assert main(["snapshot", "--json", "--fake", scenario]) == 0
    received = snapshot_from_json(json.loads(capsys.readouterr().out))
    (process,) = [p for gpu in received.gpus for p in gpu.processes if p.pid == big.pid]
    assert process.cuda is not None and process.cuda.unknown == "environment too large"
    assert snapshot_to_json(received)["gpus"][0]["processes"][0]["cuda"]["unknown"] == (
        "environment too large"
    )


@pytest.fixture
def undecodable() -> Iterator[subprocess.Popen[bytes]]:
    """A real process with bytes that are not UTF-8 in its environment and command line."""
    env = {b"PATH": os.environb.get(b"PATH", b"/usr/bin"), b"MASTER_ADDR": b"node\xff\xfe7"}
    env[b"CUDA_VISIBLE_DEVICES"] = b"\xc3(1"
    process = subprocess.Popen(
        [sys.executable, "-c", SLEEPER, b"arg\xff"], env=env, stdout=subprocess.PIPE
    )
    assert process.stdout is not None and process.stdout.readline() == b"up\n"
    yield process
    process.kill()
    process.wait()


def test_bytes_that_are_not_utf8_leave_the_json_valid_utf8(
    undecodable: subprocess.Popen[bytes],
    scenario_file: Callable[..., str],
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    scenario = scenario_file(four_cards({2: [undecodable.pid]}))
    assert main(["snapshot", "--json", "--fake", scenario]) == 0
    raw = capsysbinary.readouterr().out
    text = raw.decode("utf-8")  # strict: fails on any byte that is not UTF-8
    assert "\\udc" not in text.lower() and "\\ud8" not in text.lower()  # no lone surrogate
    document = json.loads(text)
    processes = {p["pid"]: p for gpu in document["gpus"] for p in gpu["processes"] or []}
    found = processes[undecodable.pid]
    json.dumps(document, ensure_ascii=False).encode("utf-8")  # every string encodes
    assert found["cuda"]["master_addr"] == "node\ufffd\ufffd7"
    assert found["cuda"]["visible_devices"] == "\ufffd(1"
    assert found["command"][-1] == "arg\\xff"  # the byte, shown as the sanitiser shows it


def _detail(scenario: str, pid: int) -> str:
    from gputop.core.sampling.source import open_backend

    backend = open_backend(scenario)
    try:
        snapshot: Snapshot = backend.sample()
    finally:
        backend.close()
    process = next(
        (p for gpu in snapshot.gpus for p in gpu.processes if p.pid == pid),
        GpuProcess(pid, 0, ProcessType.COMPUTE, None),
    )
    return "\n".join(line.text for line in describe_process(snapshot, process))
