"""Run a real command in a pseudo-terminal and read back every byte it wrote to it.

The bytes are fed to ``pyte`` (a terminal emulator), so a test can ask what a person would
see and what the terminal was told to do (its title), as well as look at the raw bytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pyte

from helpers.pty_terminal import terminal_env

GPUTOP = [sys.executable, "-m", "gputop"]
DEADLINE_S = 30.0


@dataclass
class PtyRun:
    """What a command wrote to its terminal, as bytes and as a terminal shows it."""

    columns: int
    rows: int
    output: bytearray = field(default_factory=bytearray)
    exit_code: int | None = None

    def __post_init__(self) -> None:
        self.screen = pyte.Screen(self.columns, self.rows)
        self.stream = pyte.ByteStream(self.screen)

    def feed(self, data: bytes) -> None:
        self.output.extend(data)
        self.stream.feed(data)

    @property
    def display(self) -> str:
        return "\n".join(self.screen.display)


def run_in_pty(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    size: tuple[int, int] = (160, 48),
    until: Callable[[PtyRun], bool] | None = None,
    then_type: bytes = b"",
    what: str = "the screen to show what the test waits for",
) -> PtyRun:
    """Start ``argv`` on a new pty of ``size`` (columns, rows); wait for ``until``, type
    ``then_type``, and read until the command exits. Fails with ``what`` after the deadline.
    """
    columns, rows = size
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    run = PtyRun(columns, rows)
    process = subprocess.Popen(
        list(argv),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=terminal_env(env),
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    try:
        deadline = time.monotonic() + DEADLINE_S
        typed = until is None
        if typed and then_type:
            os.write(master, then_type)
        while True:
            if not typed and until is not None and until(run):
                typed = True
                if then_type:
                    os.write(master, then_type)
            if time.monotonic() > deadline:
                waited = what if not typed else "the command to exit"
                raise AssertionError(
                    f"timed out after {DEADLINE_S} s waiting for {waited}; screen:\n{run.display}"
                )
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer of the pty has closed it
                    data = b""
                if not data:
                    break
                run.feed(data)
            elif process.poll() is not None and typed:
                break
        run.exit_code = process.wait(timeout=DEADLINE_S)
        return run
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            process.wait()
        os.close(master)
