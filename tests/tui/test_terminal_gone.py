"""The dashboard on a real pty whose terminal goes away, or that gets a stray SIGCONT
(docs/faults.md, "The terminal goes away").

A dropped SSH connection or a closed terminal window hangs the terminal up. A gputop that
dies of the hangup (SIGHUP) is gone; one that does not (SIGHUP ignored: ``nohup``, a
wrapper, a process manager) used to read the end of file a hung-up terminal gives again and
again, at once, for ever: 1.3 cores on a shared server, by nobody. And the kernel's SIGCONT
of the hangup, like any stray SIGCONT, made Textual start a second input thread.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from helpers.pty_terminal import PtyTerminal

from gputop.tui.textual_compat import HANGUP_RETURN_CODE

COLUMNS, ROWS = 120, 40
NO_HANGUP = (
    "import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, '-m', 'gputop', *sys.argv[1:]])"
)
"""``python -m gputop`` with SIGHUP ignored, as ``nohup`` or a wrapper leaves it."""
HELP_LINE = "move the highlight across cards"
"""A line of the help screen (``?``)."""
ALTERNATE_SCREEN = b"\x1b[?1049h"
"""What Textual writes as its application mode starts (again on resuming)."""


def _dashboard(state_dir: Path, *, ignore_hangup: bool) -> PtyTerminal:
    env = dict(os.environ, TERM="xterm-256color", GPUTOP_STATE_DIR=str(state_dir))
    options = ["--fake", "demo", "--interval", "0.2"]
    if ignore_hangup:
        command = [sys.executable, "-c", NO_HANGUP, *options]
    else:
        command = [sys.executable, "-m", "gputop", *options]
    terminal = PtyTerminal.spawn(command, env, COLUMNS, ROWS)
    assert terminal.wait_for(lambda: "Quit" in terminal.text() and "MiB" in terminal.text(), 60), (
        terminal.text()
    )
    return terminal


def _status_within(pid: int, timeout_s: float) -> int | None:
    """The child's wait status once it ended within ``timeout_s``; None if it runs on."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status
        time.sleep(0.02)
    return None


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def test_a_dashboard_that_ignores_the_hangup_exits_when_its_terminal_goes_away(
    tmp_path: Path,
) -> None:
    terminal = _dashboard(tmp_path / "state", ignore_hangup=True)
    try:
        os.close(terminal.fd)  # the terminal's side of the pty closed: a hangup
        status = _status_within(terminal.pid, 20)
        assert status is not None, (
            f"gputop runs on without its terminal (CPU: {_cpu_s(terminal.pid):.1f} s)"
        )
        assert os.waitstatus_to_exitcode(status) == HANGUP_RETURN_CODE
    finally:
        _kill(terminal.pid)


def test_a_dashboard_dies_of_the_hangup_as_before(tmp_path: Path) -> None:
    terminal = _dashboard(tmp_path / "state", ignore_hangup=False)
    try:
        os.close(terminal.fd)
        status = _status_within(terminal.pid, 20)
        assert status is not None
        assert os.waitstatus_to_exitcode(status) == -signal.SIGHUP
    finally:
        _kill(terminal.pid)


def test_a_stray_sigcont_starts_no_second_input_thread(tmp_path: Path) -> None:
    """Textual resumed its application mode on any SIGCONT: the start of that mode written
    again (the alternate screen asked for twice) and a second input thread reading beside
    the first."""
    terminal = _dashboard(tmp_path / "state", ignore_hangup=False)
    written = bytearray()
    terminal.tap = written.extend
    try:
        os.kill(terminal.pid, signal.SIGCONT)
        # a key handled after the signal: by then its handler has run on the main thread
        terminal.write(b"?")
        assert terminal.wait_for(lambda: HELP_LINE in terminal.text(), 20), terminal.text()
        assert ALTERNATE_SCREEN not in written
        terminal.write(b"\x1b")  # keys are read as before
        assert terminal.wait_for(lambda: HELP_LINE not in terminal.text(), 20), terminal.text()
        assert ALTERNATE_SCREEN not in written
    finally:
        terminal.stop()


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
