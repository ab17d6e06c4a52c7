"""ctrl+z on a screen over the dashboard (the health screen, the help) suspends it as on
the dashboard itself, as the terminal's own ctrl+z would: a modal screen's bindings hide the
dashboard's, and ctrl+z did nothing there. ``fg`` brings back the same screen."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import psutil
import pytest
from helpers.pty_terminal import PtyTerminal, suspend_and_resume

COLUMNS, ROWS = 120, 50
TIMEOUT_S = 30.0
DASHBOARD = [sys.executable, "-m", "gputop", "--fake", "demo", "--interval", "0.2"]


@pytest.mark.parametrize(
    ("key", "shown"),
    [(b"e", "escape or e closes this"), (b"?", "move the highlight across cards")],
    ids=["health", "help"],
)
def test_ctrl_z_over_a_screen_returns_to_the_shell_and_fg_brings_it_back(
    tmp_path: Path, key: bytes, shown: str
) -> None:
    env = dict(
        os.environ,
        TERM="xterm-256color",
        GPUTOP_FAKE_TIME="1000",
        GPUTOP_STATE_DIR=str(tmp_path / "state"),
        PS1="$ ",
        HISTFILE=os.devnull,
    )
    shell = PtyTerminal.spawn(["bash", "--norc", "--noprofile", "-i"], env, COLUMNS, ROWS)
    try:
        shell.write(f"{shlex.join(DASHBOARD)}\r".encode())
        assert shell.wait_for(lambda: "Quit" in shell.text(), 60), shell.text()
        shell.write(key)
        assert shell.wait_for(lambda: shown in shell.text(), TIMEOUT_S), shell.text()

        suspend_and_resume(shell, shown, TIMEOUT_S)
        shell.write(b"\x1b")  # the screen closes: the dashboard reads its keys again
        assert shell.wait_for(lambda: shown not in shell.text(), TIMEOUT_S), shell.text()
        (dashboard,) = psutil.Process(shell.pid).children()
        shell.write(b"q")
        assert shell.wait_for(lambda: not dashboard.is_running(), TIMEOUT_S)
    finally:
        shell.stop(quit_keys=b"q\rexit\r")
