"""``gputop snapshot --watch`` on a terminal: each frame fits its height, so the first line
(the host and the time, what says the frame is new) stays on the screen."""

from __future__ import annotations

import os
import sys

from helpers.pty_run import GPUTOP, PtyRun, run_in_pty

CLEAR_HOME = b"\x1b[H\x1b[J"
IN_ITS_TERMINAL = [
    sys.executable,
    "-c",
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]
"""The pty made the command's controlling terminal, so that Ctrl-C typed there is SIGINT."""


def watched(columns: int, rows: int) -> list[str]:
    """The screen a person sees with the third frame drawn whole, just before the fourth
    (then Ctrl-C). Not the screen once the third has begun: a frame may reach the pty in
    pieces, one of them ending at a line's end (a busy machine cut one there)."""

    def fourth_frame(run: PtyRun) -> bool:
        return run.output.count(CLEAR_HOME) >= 4

    env = {**os.environ, "GPUTOP_FAKE_TIME": "30"}
    run = run_in_pty(
        [*IN_ITS_TERMINAL, *GPUTOP, "snapshot", "--fake", "demo", "--watch", "0.2"],
        env,
        size=(columns, rows),
        until=fourth_frame,
        then_type=b"\x03",
    )
    assert run.exit_code == 130
    output = bytes(run.output)
    fourth = -1
    for _ in range(4):
        fourth = output.index(CLEAR_HOME, fourth + 1)
    screen = PtyRun(columns, rows)
    screen.feed(output[:fourth])
    return screen.display.splitlines()


def test_a_frame_as_tall_as_the_terminal_keeps_its_first_line() -> None:
    screen = watched(80, 24)  # the demo: a header and 23 lines
    assert screen[0].startswith("lab-gpu-01  "), screen
    assert screen[-2].startswith("… "), screen  # what did not fit, said
    assert screen[-2].rstrip().endswith("more lines: a taller terminal shows them")


def test_a_frame_that_fits_is_shown_whole() -> None:
    screen = watched(120, 40)
    assert screen[0].startswith("lab-gpu-01  "), screen
    assert not any(line.startswith("… ") for line in screen)
    assert any("gnome-shell" in line for line in screen)  # the last process of the last card
