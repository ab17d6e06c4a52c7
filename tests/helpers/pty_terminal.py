"""A program on a real pseudo-terminal, read into a terminal emulator (pyte).

Used by the screen-diff pty test and by ``make bench``: what the emulator shows is what a
person at an xterm would see, colours included, since it interprets every byte the program
writes, cursor moves and SGR sequences alike.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import termios
import time
from collections.abc import Callable, Mapping, Sequence

import pyte

QUIET_S = 0.01
"""A pause in a program's output long enough to parse what it wrote (``wait_unthrottled``)."""

SIZE_VARIABLES = ("COLUMNS", "LINES")
"""Sizes a program takes over its terminal's own (Python's ``shutil.get_terminal_size``,
so Textual and Rich): never passed on, the pty's size is the one a test asks for. A test
runner may set them (pytest-xdist's workers have ``COLUMNS=80 LINES=24``)."""

LOGIN_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)
"""Signals a login session's programs take as the default does (a hangup ends them) and a
test runner may have inherited ignored: under ``nohup`` SIGHUP, as a shell script's
background command SIGINT and SIGQUIT. An ignored signal stays ignored across ``exec``."""


def as_a_login_session() -> None:
    """In a child about to ``exec`` on its pty: the signal dispositions of a login
    session's, whatever the test runner inherited."""
    for number in LOGIN_SIGNALS:
        signal.signal(number, signal.SIG_DFL)


def terminal_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without ``SIZE_VARIABLES``: a program on a pty reads the pty's size."""
    return {key: value for key, value in env.items() if key not in SIZE_VARIABLES}


Cell = tuple[str, str, str, bool, bool, bool, bool, bool]
"""One cell as the terminal shows it: character, foreground, background and attributes."""


class PtyTerminal:
    """A child process whose terminal is a pty of ``columns`` x ``rows``, emulated by pyte."""

    def __init__(self, pid: int, fd: int, started: float, columns: int, rows: int) -> None:
        self.pid, self.fd, self.started = pid, fd, started
        self.columns, self.rows = columns, rows
        self.screen = pyte.Screen(columns, rows)
        self._stream = pyte.ByteStream(self.screen)
        self.bytes_read = 0
        self.last_read_at = started
        """Monotonic time of the last chunk read."""
        self.ended = False
        self.tap: Callable[[bytes], None] | None = None
        """Given every chunk read, before the emulator (``tests/bench/bytes_by_region.py``)."""

    @classmethod
    def spawn(
        cls, command: Sequence[str], env: Mapping[str, str], columns: int, rows: int
    ) -> PtyTerminal:
        """Start ``command`` in a new session with the pty as its controlling terminal."""
        environment = terminal_env(env)
        started = time.monotonic()
        pid, fd = pty.fork()
        if pid == 0:  # the child: set the size before the program asks for it
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
                as_a_login_session()
                os.execvpe(command[0], list(command), environment)
            finally:
                os._exit(127)
        return cls(pid, fd, started, columns, rows)

    def write(self, data: bytes) -> None:
        """Type ``data`` at the terminal (keys, as a terminal encodes them)."""
        os.write(self.fd, data)

    def pump(self, until: float, done: Callable[[], bool] = lambda: False) -> bool:
        """Read output until ``done()`` or the monotonic time ``until``; True if done."""
        while not self.ended:
            if done():
                return True
            left = until - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.05))
            if ready:
                self.read_available()
        return done()

    def read_available(self) -> int:
        """Read what is there without waiting; the number of bytes read."""
        data = self._read()
        self._take(time.monotonic(), data)
        return len(data)

    def _read(self) -> bytes:
        try:
            return os.read(self.fd, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            return b""

    def _take(self, read_at: float, data: bytes) -> None:
        if not data:
            self.ended = True
            return
        self.last_read_at = read_at
        self.bytes_read += len(data)
        if self.tap is not None:
            self.tap(data)
        self._stream.feed(data)

    def wait_unthrottled(self, done: Callable[[], bool], timeout_s: float) -> float | None:
        """Like ``wait_for``, but the program is never kept waiting by the emulator.

        A pty holds a few KB: a program writing a 30 KB frame waits for the reader, and
        pyte (Python) parses a few KB in milliseconds where a real terminal takes
        microseconds, so reading and parsing in turns would time the emulator. Here bytes
        are read as soon as they come, and parsed, chunk by chunk, only once the program
        pauses (``QUIET_S`` without output). Returns the monotonic time at which the chunk
        after which ``done()`` holds was read, or None after ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        pending: list[tuple[float, bytes]] = []
        found: float | None = None
        while found is None and not self.ended:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([self.fd], [], [], min(left, QUIET_S))
            if ready:
                pending.append((time.monotonic(), self._read()))
                if pending[-1][1]:
                    continue
            for read_at, data in pending:
                self._take(read_at, data)
                if found is None and done():
                    found = read_at
            pending.clear()
        return found

    def feed_as_if_written(self, data: bytes) -> None:
        """Show ``data`` as if another program had written it to the same terminal."""
        self._stream.feed(data)

    def wait_for(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Read until ``done()``; False after ``timeout_s`` seconds."""
        return self.pump(time.monotonic() + timeout_s, done)

    def lines(self) -> list[str]:
        """The screen's text, one string of ``columns`` characters a row."""
        return list(self.screen.display)

    def text(self) -> str:
        return "\n".join(self.lines())

    def cells(self) -> list[list[Cell]]:
        """Every cell with its colours and attributes, for comparing two screens exactly."""
        rows: list[list[Cell]] = []
        for y in range(self.rows):
            line = self.screen.buffer[y]
            rows.append(
                [
                    (
                        char.data,
                        char.fg,
                        char.bg,
                        char.bold,
                        char.italics,
                        char.underscore,
                        char.reverse,
                        char.strikethrough,
                    )
                    for char in (line[x] for x in range(self.columns))
                ]
            )
        return rows

    def stop(self, quit_keys: bytes = b"q", grace_s: float = 3.0) -> None:
        """Quit as a person would; killed (its whole session) if it has not left in time."""
        with contextlib.suppress(OSError):
            self.write(quit_keys)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and not _reaped(self.pid):
            if self.ended:
                time.sleep(0.02)
            else:
                self.pump(min(deadline, time.monotonic() + 0.05))
        if not _reaped(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)  # pty.fork made it a session leader
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _reaped(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


def differing_rows(left: list[list[Cell]], right: list[list[Cell]]) -> list[int]:
    """The rows (0-based) where two screens differ in any character, colour or attribute."""
    return [y for y, (a, b) in enumerate(zip(left, right, strict=True)) if a != b]


CTRL_Z = b"\x1a"


def suspend_and_resume(shell: PtyTerminal, shown: str, timeout_s: float) -> None:
    """ctrl+z to the dashboard in an interactive ``shell``: the shell reports it stopped
    and has the terminal (a command runs there, and ``shown`` is gone from the screen);
    ``fg`` brings the dashboard back showing ``shown`` again."""
    shell.write(CTRL_Z)
    assert shell.wait_for(lambda: "Stopped" in shell.text(), timeout_s), shell.text()
    shell.write(b"clear; echo shell-$((6 * 7))\r")  # the shell has the terminal
    assert shell.wait_for(lambda: "shell-42" in shell.text(), timeout_s), shell.text()
    assert shown not in shell.text()
    shell.write(b"fg\r")
    assert shell.wait_for(lambda: shown in shell.text(), timeout_s), shell.text()
