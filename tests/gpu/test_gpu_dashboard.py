"""The dashboard in tmux on the real driver: every card's name and UUID on screen, and its
CPU over 30 s (beside nvitop's, where nvitop is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu.driver import DRIVER

if not DRIVER.present:
    pytest.skip(DRIVER.reason, allow_module_level=True)

import psutil

from gpu import compare
from gpu.conftest import smi_list

MEASURE_S = 30.0
CPU_CEILING_PERCENT = 5.0
"""Twice the dashboard's budget on simulated GPUs (README, Speed): real NVML calls cost more."""
WIDTH, HEIGHT = 300, 120


class Tmux:
    """A tmux server of the check's own (its socket in a temporary directory)."""

    def __init__(self, folder: Path) -> None:
        self.socket = str(folder / "tmux.sock")

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> int:
        # Without COLUMNS and LINES: Python (so Textual) prefers them to the pane's own size.
        command = ["env", "-u", "COLUMNS", "-u", "LINES", *(f"{k}={v}" for k, v in env.items())]
        command += argv
        self("new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT), "--", *command)
        return int(self("display-message", "-p", "-t", name, "#{pane_pid}").strip())

    def screen(self, name: str) -> str:
        return self("capture-pane", "-p", "-t", name)


@pytest.fixture(scope="module")
def tmux(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the dashboard check runs the dashboard in it")
    server = Tmux(tmp_path_factory.mktemp("tmux"))
    yield server
    subprocess.run(["tmux", "-S", server.socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture(scope="module")
def dashboard(tmux: Tmux, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = {
        "TERM": "xterm-256color",
        "GPUTOP_STATE_DIR": str(tmp_path_factory.mktemp("state") / "gputop"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PATH": os.environ.get("PATH", ""),
    }
    pid = tmux.start("gputop", [sys.executable, "-m", "gputop"], env)
    return {"pid": pid, "env": env}


def test_dashboard_shows_every_card_name_and_uuid(result, tmux, dashboard) -> None:
    gpus = smi_list()
    wanted = [text for gpu in gpus for text in (gpu["name"], gpu["uuid"][:12])]
    deadline = time.monotonic() + 60
    screen = tmux.screen("gputop")
    while any(text not in screen for text in wanted) and time.monotonic() < deadline:
        time.sleep(0.25)
        screen = tmux.screen("gputop")
    for gpu in gpus:
        for kind, text in (("name", gpu["name"]), ("UUID", gpu["uuid"][:12])):
            shown = text in screen
            result.comparisons.append(
                compare.Comparison(
                    f"GPU {gpu['index']} {kind} on screen",
                    "shown" if shown else "not shown",
                    text,
                    "on the screen",
                    shown,
                )
            )
    assert not result.failed, screen


def _cpu_percent(pid: int, seconds: float) -> float:
    process = psutil.Process(pid)
    first, started = process.cpu_times(), time.monotonic()
    time.sleep(seconds)  # a measurement over a fixed window, not a wait for a condition
    last, ended = process.cpu_times(), time.monotonic()
    used = (last.user - first.user) + (last.system - first.system)
    return 100.0 * used / (ended - started)


def test_dashboard_cpu_over_30_s(result, tmux, dashboard, request) -> None:
    if hasattr(request.config, "workerinput"):
        pytest.skip("measured by make gpu-check alone: other tests share this machine's CPUs here")
    ours = _cpu_percent(dashboard["pid"], MEASURE_S)
    result.numbers["gputop CPU, % of a core"] = round(ours, 2)
    nvitop = shutil.which("nvitop") or os.environ.get("NVITOP")
    if nvitop:
        pid = tmux.start("nvitop", [nvitop], dashboard["env"])
        name = smi_list()[0]["name"]
        deadline = time.monotonic() + 60
        while name not in tmux.screen("nvitop") and time.monotonic() < deadline:
            time.sleep(0.25)  # measured from its first frame on, as gputop's
        result.numbers["nvitop CPU, % of a core"] = round(_cpu_percent(pid, MEASURE_S), 2)
    else:
        result.numbers["nvitop"] = "not installed"
    result.comparisons.append(
        compare.Comparison(
            "dashboard CPU over 30 s",
            ours,
            f"<= {CPU_CEILING_PERCENT:g}",
            "% of one core",
            ours <= CPU_CEILING_PERCENT,
        )
    )
    assert not result.failed, result.numbers
