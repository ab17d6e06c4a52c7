"""The supervisor's one way to wait: a self-pipe that signals write to.

A supervisor sleeps most of its life (between GPU polls, while its job runs) and must wake
at once for a stop request (SIGTERM), the job's exit (SIGCHLD) or a resized window
(SIGWINCH). Python runs signal handlers in the main thread between bytecodes; each handler
here only sets a flag and writes a byte to a pipe that every wait selects on.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from types import FrameType


class Wakeup:
    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self._write_fd, False)
        self.stop_signal: int | None = None
        """The signal that asked the supervisor to stop the job (SIGTERM, SIGINT)."""
        self.resized = False

    def install(self) -> None:
        """Take over the signals a supervisor cares about.

        SIGHUP gets a handler that does nothing rather than SIG_IGN: an ignored signal
        stays ignored in the job after ``exec``, a handled one goes back to its default.
        """
        signal.signal(signal.SIGHUP, self._ignore)
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGCHLD, self._poke)
        signal.signal(signal.SIGWINCH, self._on_resize)

    def wait(self, timeout_s: float, also: tuple[int, ...] = ()) -> list[int]:
        """Sleep until a signal, readable ``also`` fds, or the timeout; returns readable fds."""
        try:
            readable, _, _ = select.select([self.read_fd, *also], [], [], max(0.0, timeout_s))
        except OSError:
            return []
        if self.read_fd in readable:
            self._drain()
        return [fd for fd in readable if fd != self.read_fd]

    def poke(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._write_fd, b"!")

    def _drain(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self.read_fd, 4096):
                pass

    def _ignore(self, signum: int, frame: FrameType | None) -> None:
        return None

    def _poke(self, signum: int, frame: FrameType | None) -> None:
        self.poke()

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_signal = signum
        self.poke()

    def _on_resize(self, signum: int, frame: FrameType | None) -> None:
        self.resized = True
        self.poke()
