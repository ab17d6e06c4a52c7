"""The dashboard on a real pty, suspended and resumed, and with its terminal's settings
changed under it (docs/faults.md, "Suspended, resumed, or its terminal changed").

While it is stopped (ctrl+z, or ``kill -TSTP``) the shell and other programs write on the
terminal: they may clear it, leave a scrolling region, newline mode or a colour set. Once it
resumes (``fg``), it does what ``ctrl+l`` does: the scrolling region, newline mode and the
pen reset, and every cell sent again. And a terminal whose ``ONLCR`` another program turned
back on while the dashboard runs (``stty onlcr`` on its tty) gets it turned off again before
the next frame, whose line feeds must move down one row and nothing else.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import psutil
import pyte
import pytest
from helpers.pty_terminal import Cell, PtyTerminal, differing_rows

COLUMNS, ROWS = 120, 60
"""Tall enough for the PyTorch view to show all its lines without a scroll bar."""
TIMEOUT_S = 30.0
HELP_LINE = "move the highlight across cards"
"""A line of the help screen (``?``)."""
CTRL_L, CTRL_Z = b"\x0c", b"\x1a"
ANOTHER_PROGRAM = b"\x1b[2J\x1b[5;30r\x1b[20h\x1b[7m$ "
"""What a shell or a program run meanwhile may leave: the screen cleared, a scrolling region
(rows 5 to 30), newline mode on (LNM) and reverse video."""


DASHBOARD = [sys.executable, "-m", "gputop", "--fake", "demo", "--interval", "0.2"]


def dashboard_env(tmp_path: Path) -> dict[str, str]:
    """A frozen clock: nothing on the screen changes unless asked."""
    return dict(
        os.environ,
        TERM="xterm-256color",
        GPUTOP_FAKE_TIME="1000",
        GPUTOP_STATE_DIR=str(tmp_path / "state"),
    )


def first_frame(terminal: PtyTerminal) -> bool:
    """The first frame, and the PyTorch view's probes answered: a probe that answers later
    (torch's import, slow on a loaded machine) changes the screen after it is compared."""
    return terminal.wait_for(lambda: settled(terminal.text()), 60)


def settled(text: str) -> bool:
    return "Quit" in text and "MiB" in text and "torch:" in text and "checking" not in text


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[PtyTerminal]:
    """The dashboard in a session of its own, its first frame shown."""
    shown = PtyTerminal.spawn(DASHBOARD, dashboard_env(tmp_path), COLUMNS, ROWS)
    try:
        assert first_frame(shown), shown.text()
        yield shown
    finally:
        shown.stop()


def process_state(pid: int) -> str:
    """``T`` while stopped, ``S`` or ``R`` while it runs (/proc/PID/stat)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


MARKS = f"\x1b7\x1b[1;1H#\x1b[{ROWS};{COLUMNS}H#\x1b8".encode()
"""A mark on the screen's first cell and on its last, blanks in the dashboard; the cursor
saved and restored around them (DECSC, DECRC): a frame's moves start from where the last
one left it."""


def marked(terminal: PtyTerminal) -> bool:
    return "#" in (terminal.lines()[0][0], terminal.lines()[-1][-1])


def wait_for_a_whole_repaint(terminal: PtyTerminal) -> bool:
    """Whether every cell is drawn again: Textual draws the rows in order, so once the
    marks on the first and the last cell are gone, so is whatever else was wrong."""
    terminal.feed_as_if_written(MARKS)
    return terminal.wait_for(lambda: not marked(terminal), TIMEOUT_S)


def repainted_by_ctrl_l(terminal: PtyTerminal) -> list[list[Cell]]:
    terminal.write(CTRL_L)
    assert wait_for_a_whole_repaint(terminal), terminal.text()
    return terminal.cells()


def ended(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def onlcr_on(terminal: PtyTerminal) -> bool:
    """Whether the pty turns each line feed the app writes into CR LF; its master reads and
    sets the settings of the side the app writes to."""
    output_flags = termios.tcgetattr(terminal.fd)[1]
    return bool(output_flags & termios.OPOST and output_flags & termios.ONLCR)


def turn_onlcr_on(terminal: PtyTerminal) -> None:
    """``stty onlcr`` on the dashboard's tty, from another program."""
    attrs = termios.tcgetattr(terminal.fd)
    attrs[1] |= termios.OPOST | termios.ONLCR
    termios.tcsetattr(terminal.fd, termios.TCSANOW, attrs)


def shows(terminal: PtyTerminal, screen: list[list[Cell]]) -> bool:
    """Whether the terminal comes to show ``screen``, in every cell and colour."""
    return terminal.wait_for(lambda: not differing_rows(terminal.cells(), screen), TIMEOUT_S)


def test_resuming_after_a_suspend_repaints_every_cell_and_resets_the_terminal(
    terminal: PtyTerminal,
) -> None:
    before = repainted_by_ctrl_l(terminal)
    os.kill(terminal.pid, signal.SIGTSTP)  # what ctrl+z does: the dashboard stops itself
    assert terminal.wait_for(lambda: process_state(terminal.pid) == "T", TIMEOUT_S)
    terminal.feed_as_if_written(ANOTHER_PROGRAM)

    os.kill(terminal.pid, signal.SIGCONT)  # fg

    assert shows(terminal, before), differing_rows(terminal.cells(), before)
    assert terminal.screen.margins is None  # the whole screen scrolls again
    assert pyte.modes.LNM not in terminal.screen.mode
    assert not onlcr_on(terminal)


def test_onlcr_turned_on_while_it_runs_is_turned_off_before_the_next_frame(
    terminal: PtyTerminal,
) -> None:
    before = repainted_by_ctrl_l(terminal)
    turn_onlcr_on(terminal)

    terminal.write(b"?")  # the help screen, then back: diffed frames
    assert terminal.wait_for(lambda: HELP_LINE in terminal.text(), TIMEOUT_S), terminal.text()
    terminal.write(b"\x1b")

    assert shows(terminal, before), differing_rows(terminal.cells(), before)
    assert not onlcr_on(terminal)


def test_ctrl_l_turns_onlcr_off_again(terminal: PtyTerminal) -> None:
    turn_onlcr_on(terminal)

    repainted_by_ctrl_l(terminal)

    assert not onlcr_on(terminal)


def test_ctrl_z_without_a_shell_to_return_to_says_so_and_runs_on(terminal: PtyTerminal) -> None:
    """A dashboard no job-control shell started (here a session of its own, as under
    ``ssh -t host gputop``) would stay stopped with nobody to resume it."""
    terminal.write(CTRL_Z)

    assert terminal.wait_for(lambda: "job control" in terminal.text(), TIMEOUT_S), terminal.text()
    assert process_state(terminal.pid) != "T"


@pytest.mark.parametrize("under_make", [False, True], ids=["itself", "under-make"])
def test_ctrl_z_returns_to_the_shell_and_fg_brings_the_dashboard_back_whole(
    tmp_path: Path, under_make: bool
) -> None:
    """Started by the shell itself, or by a program in its job (``make demo``: make waits in
    the same process group), which must stop only once the dashboard has given the
    terminal back: a shell that takes the terminal first stops the dashboard halfway."""
    env = {**dashboard_env(tmp_path), "PS1": "$ ", "HISTFILE": os.devnull}
    command = shlex.join(DASHBOARD)
    if under_make:
        (tmp_path / "Makefile").write_text(f"demo:\n\t{command}\n")
        command = shlex.join(["make", "-s", "-C", str(tmp_path), "demo"])
    shell = PtyTerminal.spawn(["bash", "--norc", "--noprofile", "-i"], env, COLUMNS, ROWS)
    try:
        shell.write(f"{command}\r".encode())
        assert first_frame(shell), shell.text()
        before = repainted_by_ctrl_l(shell)

        shell.write(CTRL_Z)
        assert shell.wait_for(lambda: "Stopped" in shell.text(), TIMEOUT_S), shell.text()
        shell.write(b"echo $((6 * 7))\r")  # the shell has the terminal
        assert shell.wait_for(lambda: "\n42" in shell.text(), TIMEOUT_S), shell.text()
        shell.write(b"fg\r")

        assert shows(shell, before), differing_rows(shell.cells(), before)
        (dashboard,) = psutil.Process(shell.pid).children()
        shell.write(b"q")  # the dashboard reads its keys again, and quits
        assert shell.wait_for(lambda: ended(dashboard), TIMEOUT_S)  # its output read meanwhile
        shell.write(b"echo $((7 * 8))\r")  # the shell has the terminal again
        assert shell.wait_for(lambda: "56" in shell.text(), TIMEOUT_S), shell.text()
    finally:
        shell.stop(quit_keys=b"exit\r")
