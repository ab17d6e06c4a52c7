"""Real processes with chosen CUDA variables on simulated cards: what the CUDA-view tests
share (tests/unit/test_process_cuda_view.py, test_cut_environment.py, test_cli_map_driver.py,
test_dashboard_process_detail.py). Their fixture ``start_process`` is in tests/conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from gputop.cli.main import main
from helpers.scenarios import minimal_gpu

UUIDS = [f"GPU-{n}1111111-aaaa-bbbb-cccc-00000000000{n}" for n in range(4)]
SLEEPER = "import sys, time; sys.stdout.write('up\\n'); sys.stdout.flush(); time.sleep(120)"


def running_sleeper(env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """A sleeping Python with ``env``, returned once it says it runs: Popen returns when the
    child's exec has closed its descriptors, before the kernel has set out its environment
    and arguments, and until then ``/proc/PID/environ`` reads empty (under load, most reads)."""
    process = subprocess.Popen([sys.executable, "-c", SLEEPER], env=env, stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"up\n"
    return process


def start_processes() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """A real process with the given variables added to a clean environment."""
    started: list[subprocess.Popen[str]] = []

    def start(**variables: str) -> subprocess.Popen[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin"), **variables}
        process = subprocess.Popen(
            [sys.executable, "-c", SLEEPER], env=env, stdout=subprocess.PIPE, text=True
        )
        assert process.stdout is not None and process.stdout.readline() == "up\n"
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def four_cards(processes: dict[int, list[int]]) -> list[dict[str, Any]]:
    """Four A100s; ``processes[physical index]``: the pids NVML shows on it."""
    return [
        minimal_gpu(
            uuid=UUIDS[index],
            pci_bus_id=f"00000000:0{index + 1}:00.0",
            processes=[
                {"pid": pid, "used_memory_mib": 1000, "type": "C"}
                for pid in processes.get(index, [])
            ],
        )
        for index in range(4)
    ]


def snapshot_processes(
    capsys: pytest.CaptureFixture[str], scenario: str
) -> dict[int, dict[str, Any]]:
    assert main(["snapshot", "--json", "--fake", scenario]) == 0
    document = json.loads(capsys.readouterr().out)
    return {p["pid"]: p for gpu in document["gpus"] for p in gpu["processes"] or []}
