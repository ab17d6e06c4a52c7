"""ctrl+z in the fleet dashboard returns to the shell, as in the local dashboard and the
lab, and ``fg`` brings it back redrawn: before, the fleet had no ctrl+z at all, and the key
did nothing. Over the table and over its help screen."""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
from helpers.pty_terminal import PtyTerminal, suspend_and_resume

COLUMNS, ROWS = 120, 40
TIMEOUT_S = 30.0
EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})


class _NoSeries(BaseHTTPRequestHandler):
    """A Prometheus that scrapes nothing: every query's answer is an empty vector."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self) -> None:
        body = EMPTY.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoSeries)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("key", "shown"),
    [(b"", "0 nodes"), (b"?", "suspend to the shell; fg resumes")],
    ids=["table", "help"],
)
def test_ctrl_z_returns_to_the_shell_and_fg_brings_the_fleet_back(
    tmp_path: Path, prometheus: str, key: bytes, shown: str
) -> None:
    env = dict(os.environ, TERM="xterm-256color", PS1="$ ", HISTFILE=os.devnull)
    command = shlex.join([sys.executable, "-m", "gputop", "--prometheus", prometheus])
    shell = PtyTerminal.spawn(["bash", "--norc", "--noprofile", "-i"], env, COLUMNS, ROWS)
    try:
        shell.write(f"{command}\r".encode())
        assert shell.wait_for(lambda: "0 nodes" in shell.text(), 60), shell.text()
        if key:
            shell.write(key)
            assert shell.wait_for(lambda: shown in shell.text(), TIMEOUT_S), shell.text()

        suspend_and_resume(shell, shown, TIMEOUT_S)

        (fleet,) = psutil.Process(shell.pid).children()
        if key:  # it reads its keys again
            shell.write(b"\x1b")
            assert shell.wait_for(lambda: shown not in shell.text(), TIMEOUT_S), shell.text()
        shell.write(b"q")
        assert shell.wait_for(lambda: not fleet.is_running(), TIMEOUT_S), shell.text()
    finally:
        shell.stop(quit_keys=b"q\rexit\r")
