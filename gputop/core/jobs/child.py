"""The job's process as its supervisor sees it: run directly or on a pty (tmux mode).

Signal handlers only set a flag and write a byte to a pipe every wait selects on, so a stop,
the job's exit or a resize wakes the supervisor at once. On a pty the job leads its own
session as when detached; the pane is raw so every key, Ctrl-C included, reaches the job.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pty
import select
import signal
import subprocess
import termios
import time
import tty
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Protocol

from gputop.core.private_files import open_log_append


class Child(Protocol):
    """The running job, as the supervision loop sees it (a Popen, or a pty relay)."""

    pid: int

    def poll(self) -> int | None: ...  # negative for a signal, like Popen's

    def wait_for_event(self, timeout_s: float) -> None: ...  # relaying terminal I/O meanwhile

    def finish(self) -> None: ...  # last output copied, terminal restored


class Wakeup:
    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self._write_fd, False)
        self.stop_signal: int | None = None
        """The signal that asked the supervisor to stop the job (SIGTERM, SIGINT)."""
        self.resized = False

    def install(self) -> None:
        """Take over the signals a supervisor cares about. SIGHUP gets a handler that does
        nothing, not SIG_IGN: an ignored signal stays ignored in the job after ``exec``."""
        signal.signal(signal.SIGHUP, lambda signum, frame: None)
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGCHLD, lambda signum, frame: self.poke())
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

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_signal = signum
        self.poke()

    def _on_resize(self, signum: int, frame: FrameType | None) -> None:
        self.resized = True
        self.poke()


def start_detached(
    argv: Sequence[str], cwd: str, env: Mapping[str, str], log_path: str, output: bool = True
) -> subprocess.Popen[bytes]:
    """``argv`` leading a session of its own (no terminal: it survives logout), reading
    nothing, its stderr (and its stdout, with ``output``) appended to the log."""
    log_fd = open_log_append(log_path)
    try:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log_fd if output else subprocess.DEVNULL,
            stderr=log_fd,
            close_fds=True,
            start_new_session=True,
        )
    finally:
        os.close(log_fd)


class PopenChild:
    """A detached job: a ``Popen`` in a session of its own, output to its log, whose waits
    are the supervisor's."""

    def __init__(
        self, argv: Sequence[str], cwd: str, env: dict[str, str], log_path: str, wake: Wakeup
    ) -> None:
        self.process = start_detached(argv, cwd, env, log_path)
        self.pid = self.process.pid
        self._wake = wake

    def poll(self) -> int | None:
        return self.process.poll()

    def wait_for_event(self, timeout_s: float) -> None:
        self._wake.wait(timeout_s)

    def finish(self) -> None:
        return None


DRAIN_S = 0.5
READ_SIZE = 65536


class PtyChild:
    """A job running on a pty whose other side this process relays."""

    def __init__(
        self, argv: Sequence[str], cwd: str, env: dict[str, str], log_path: str, wake: Wakeup
    ) -> None:
        self._wake = wake
        self._returncode: int | None = None
        self._stdin: int | None = 0 if _isatty(0) else None
        self._saved_tty: list | None = None
        self._log_fd = open_log_append(log_path)
        try:
            self.pid, self._master = _spawn(list(argv), cwd, env)  # OSError, as with Popen
        except OSError:
            os.close(self._log_fd)
            raise
        self._master_open = True
        self._copy_window_size()
        if self._stdin is not None:
            with contextlib.suppress(termios.error):
                self._saved_tty = termios.tcgetattr(self._stdin)
                tty.setraw(self._stdin)

    def poll(self) -> int | None:
        if self._returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self._returncode = 0
            else:
                if pid:
                    self._returncode = os.waitstatus_to_exitcode(status)
        return self._returncode

    def wait_for_event(self, timeout_s: float) -> None:
        fds = (self._master if self._master_open else None, self._stdin)
        readable = self._wake.wait(timeout_s, tuple(fd for fd in fds if fd is not None))
        if self._wake.resized:
            self._wake.resized = False
            self._copy_window_size()
        if self._master_open and self._master in readable:
            self._relay_output()
        if self._stdin is not None and self._stdin in readable:
            self._relay_input()

    def finish(self) -> None:
        """Copy what the job wrote last, give the pane back its settings, close up."""
        deadline = time.monotonic() + DRAIN_S
        while self._master_open and time.monotonic() < deadline:
            readable = self._wake.wait(0.05, (self._master,))
            if self._master in readable:
                self._relay_output()
            elif not readable:
                break
        if self._stdin is not None and self._saved_tty is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self._stdin, termios.TCSADRAIN, self._saved_tty)
            self._saved_tty = None
        with contextlib.suppress(OSError):
            os.close(self._master)
        with contextlib.suppress(OSError):
            os.close(self._log_fd)

    def _relay_output(self) -> None:
        try:
            data = os.read(self._master, READ_SIZE)
        except OSError as error:  # EIO: every process holding the terminal has ended
            if error.errno not in (errno.EIO, errno.EBADF):
                raise
            data = b""
        if not data:
            self._master_open = False
            return
        with contextlib.suppress(OSError):
            os.write(self._log_fd, data)
        with contextlib.suppress(OSError):
            _write_all(1, data)

    def _relay_input(self) -> None:
        assert self._stdin is not None
        try:
            data = os.read(self._stdin, 4096)
        except OSError:
            data = b""
        if not data:
            self._stdin = None  # the pane went away: the job goes on
            return
        with contextlib.suppress(OSError):
            _write_all(self._master, data)

    def _copy_window_size(self) -> None:
        if self._stdin is None:
            return
        with contextlib.suppress(OSError):
            size = fcntl.ioctl(self._stdin, termios.TIOCGWINSZ, b"\0" * 8)
            fcntl.ioctl(self._master, termios.TIOCSWINSZ, size)


def wait_for_enter(wake: Wakeup) -> None:
    """Keep the tmux window open until a key or a stop request, so the end can be read."""
    if not _isatty(0):
        return
    with contextlib.suppress(OSError):
        os.write(1, b"[gputop] press Enter to close this window\r\n")
    while wake.stop_signal is None:
        if 0 in wake.wait(60.0, (0,)):
            with contextlib.suppress(OSError):
                os.read(0, 4096)
            return


def _spawn(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[int, int]:
    """``pty.fork`` + exec; an exec failure comes back as OSError, as with Popen."""
    report_read, report_write = os.pipe()  # both close-on-exec: EOF means exec worked
    pid, master = pty.fork()
    if pid == 0:  # the child: session leader, with the pty as its controlling terminal
        try:
            os.close(report_read)
            os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.write(report_write, str(error.errno or 0).encode())
        finally:
            os._exit(127)
    os.close(report_write)
    with os.fdopen(report_read, "rb") as report:
        failure = report.read()
    if failure:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        os.close(master)
        code = int(failure) or errno.ENOEXEC
        raise OSError(code, os.strerror(code), argv[0])
    return pid, master


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
