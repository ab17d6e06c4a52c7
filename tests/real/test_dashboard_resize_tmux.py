"""The same resize on a real terminal: the dashboard inside tmux, its window resized.

tmux gives the dashboard a real pty and sends it SIGWINCH when ``resize-window`` changes the
window's size, as a terminal emulator does when a person drags its corner. A dashboard
started at 200x50 and resized to 80x24 (then back) must show, character for character, what
one started at that size shows (issue 28, item 1). The tmux server runs on a socket in the
test's temporary directory and is killed by it: no other tmux is touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.pty_terminal import terminal_env

TIMEOUT_S = 30.0
POLL_S = 0.05
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    def __init__(self, socket: Path, config: Path, env: dict[str, str]) -> None:
        self.socket, self.config, self.env = socket, config, env

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), "-f", str(self.config), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=True,
        )
        return done.stdout

    def start(self, name: str, size: tuple[int, int], cwd: Path, command: list[str]) -> None:
        width, height = size
        self("new-session", "-d", "-s", name, "-c", str(cwd), "-x", str(width), "-y", str(height))
        self("respawn-pane", "-k", "-t", name, *command)

    def screen(self, name: str) -> str:
        return self("capture-pane", "-p", "-t", name)

    def size(self, name: str) -> tuple[int, int]:
        shown = self("display-message", "-p", "-t", name, "#{pane_width} #{pane_height}")
        width, height = shown.split()
        return int(width), int(height)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    env = terminal_env(os.environ)
    env.update(
        TERM="xterm-256color",
        GPUTOP_FAKE_TIME="30",
        GPUTOP_STATE_DIR=str(tmp_path / "state"),
        GPUTOP_SCREEN_DIFF="1",
    )
    env.pop("TMUX", None)
    config = tmp_path / "tmux.conf"
    config.write_text("set -g status off\n")  # the whole window is the dashboard's
    server = Tmux(tmp_path / "tmux.sock", config, env)
    yield server
    subprocess.run(
        ["tmux", "-S", str(server.socket), "kill-server"], env=env, capture_output=True, timeout=30
    )


DASHBOARD = [sys.executable, "-m", "gputop", "--fake", "demo", "--interval", "3600"]
"""One sample: the sparklines then match between the dashboards."""


def _drawn(text: str) -> bool:
    settling = ("checking", "waiting")  # the first sample, the PyTorch view's probes
    return "lab-gpu-01" in text and "Quit" in text and not any(w in text for w in settling)


def _stable(tmux: Tmux, name: str) -> str:
    """The pane once it is drawn and two captures in a row agree."""
    deadline = time.monotonic() + TIMEOUT_S
    before = ""
    while time.monotonic() < deadline:
        now = tmux.screen(name)
        if _drawn(now) and now == before:
            return now
        before = now
        time.sleep(POLL_S)  # polling a condition: tmux has no way to wait for output
    raise AssertionError(f"{name} never settled:\n{before}")


def _becomes(tmux: Tmux, name: str, expected: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while (shown := tmux.screen(name)) != expected:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"after the resize {name} shows:\n{shown}\n\na fresh start shows:\n{expected}"
            )
        time.sleep(POLL_S)  # polling a condition, as above


def test_resize_on_a_real_terminal_gives_a_fresh_start_s_layout(tmux: Tmux, tmp_path: Path) -> None:
    for name, size in (("resized", (200, 50)), ("small", (80, 24)), ("large", (200, 50))):
        tmux.start(name, size, tmp_path, DASHBOARD)
    fresh_small, fresh_large = _stable(tmux, "small"), _stable(tmux, "large")
    assert "╭" not in fresh_small.splitlines()[1], "80x24 starts with one-line cards"
    _becomes(tmux, "resized", fresh_large)

    tmux("resize-window", "-t", "resized", "-x", "80", "-y", "24")
    assert tmux.size("resized") == (80, 24)
    _becomes(tmux, "resized", fresh_small)

    tmux("resize-window", "-t", "resized", "-x", "200", "-y", "50")
    assert tmux.size("resized") == (200, 50)
    _becomes(tmux, "resized", fresh_large)
