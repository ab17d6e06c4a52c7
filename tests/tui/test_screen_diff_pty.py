"""The real dashboard on a real pty: with the screen diff the terminal shows exactly what
Textual drew, in every cell and colour, and gets fewer bytes for it.

Two dashboards run side by side on the same scenario and frozen clock, one with the diff
(the default) and one with ``GPUTOP_SCREEN_DIFF=0``, which writes what Textual writes. Both
get the same keys; after each step, once each screen shows the step's effect, the two
emulated terminals (pyte) must become identical, colours and attributes included.

The diffing dashboards also log what the diff did with each write (``ScreenDiff``'s
``last_outcome``): once the first frame is shown, no frame may pass through undiffed (a
change in Textual's output that the diff does not follow would otherwise silently send
everything whole); and a dashboard left refreshing on a live clock must be sent at most a
tenth of the bytes Textual wrote for it.
"""

from __future__ import annotations

import os
import sys
import termios
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers.pty_terminal import PtyTerminal, differing_rows

from gputop.tui.screen_diff import DIFFED, NOT_FOLLOWED, UNCHANGED, WHOLE

COLUMNS, ROWS = 120, 52
"""Tall enough for the PyTorch view's probe lines ("Driver: ...", "torch: ...") to be on the
screen: the first frame waits for both probes' answers (``first_frame``)."""
HOST = "dgx-h100-07"
HELP_LINE = "move the highlight across cards"
"""A line of the help screen (``?``): it is showing."""
TORCH_LINE = "CUDA_VISIBLE_DEVICES="
"""A line of the PyTorch view (``p``): it is showing."""
DEFAULT_SORT = "by GPU memory"
DOWN, TAB, ESCAPE, CTRL_L = b"\x1b[B", b"\t", b"\x1b", b"\x0c"
STRAY = b"\x1b[3;5H\x1b[31mstray output\x1b[0m\x1b[2;1H\x1b[K"
"""Another program's output on the diffing dashboard's terminal: rows 2 and 3 (1 and 2 from 0)."""
TIMEOUT_S = 20.0
PROBES_S = 70.0
"""How long the first frame may wait for the probes: the torch probe gives up after 60 s
(gputop.core.probes.torch_probe), and importing torch on a loaded machine takes seconds."""
MOST_OF_TEXTUALS_BYTES = 0.25
"""The diff writes at most this share of the bytes Textual gives it while the dashboard
refreshes (docs/screen-diff.md: about 11 % measured at a refresh every 0.2 s, since the
partial updates hand it only the changed spans; a diff that stopped following Textual's
output would send all of it)."""
LIVE_FRAMES = 40
"""Refreshes of the live dashboard measured (0.2 s apart)."""

LOGGING_OUTCOMES = """
import runpy, sys
from gputop.tui import screen_diff
log = open(sys.argv.pop(1), "a", encoding="utf-8", buffering=1)
diff_frame = screen_diff.ScreenDiff.filter
def logged(self, data, size):
    out = diff_frame(self, data, size)
    log.write(f"{self.last_outcome}\\t{len(data.encode())}\\t{len(out.encode())}\\n")
    return out
screen_diff.ScreenDiff.filter = logged
sys.argv[0] = "gputop"
runpy.run_module("gputop", run_name="__main__", alter_sys=True)
"""
"""``python -m gputop`` with each write's outcome logged: outcome, bytes in, bytes out."""


@dataclass(frozen=True)
class Write:
    outcome: str
    textual_bytes: int
    sent_bytes: int


def outcomes(log: Path) -> list[Write]:
    """The writes logged so far (a line still being written is left for later)."""
    text = log.read_text(encoding="utf-8") if log.exists() else ""
    lines = text.split("\n")[:-1]
    return [Write(o, int(i), int(n)) for o, i, n in (line.split("\t") for line in lines)]


def dashboard(
    state_dir: Path, screen_diff: bool, log: Path | None = None, frozen: bool = True
) -> PtyTerminal:
    env = dict(
        os.environ,
        TERM="xterm-256color",
        COLORTERM="truecolor",
        GPUTOP_FAKE_TIME="1000",
        GPUTOP_STATE_DIR=str(state_dir),
        GPUTOP_SCREEN_DIFF="1" if screen_diff else "0",
    )
    env.pop("NO_COLOR", None)
    if not frozen:
        del env["GPUTOP_FAKE_TIME"]  # the simulated cards change at every refresh
    options = ["--fake", "dgx-h100", "--interval", "0.2"]
    if log is None:
        command = [sys.executable, "-m", "gputop", *options]
    else:
        command = [sys.executable, "-c", LOGGING_OUTCOMES, str(log), *options]
    return PtyTerminal.spawn(command, env, COLUMNS, ROWS)


def first_frame(text: str) -> bool:
    """Every panel drawn, the driver and torch probes (started after the first frame)
    answered: a dashboard whose probe answers a refresh after the other's shows other lines
    in its PyTorch view meanwhile (and, its text growing, another scroll bar)."""
    return (
        HOST in text
        and "MHz" in text
        and TORCH_LINE in text
        and "Quit" in text
        and "Driver: " in text
        and "Driver: checking" not in text
        and "torch: " in text
        and "torch: checking" not in text
    )


@dataclass
class Step:
    name: str
    keys: bytes
    shown: Callable[[str], bool]
    """True once the screen's text shows the step's effect."""


STEPS = [
    Step("first frame", b"", first_frame),
    Step("PyTorch view hidden", b"p", lambda text: TORCH_LINE not in text),
    Step(
        "process table focused, cursor moved down three rows, help open",
        TAB + DOWN * 3 + b"?",
        lambda text: HELP_LINE in text,
    ),
    Step("help closed", ESCAPE, lambda text: HELP_LINE not in text),
    Step("sorted by the next column", b"s", lambda text: DEFAULT_SORT not in text),
    Step("PyTorch view shown again", b"p", lambda text: TORCH_LINE in text),
]


@dataclass
class Session:
    """What the two terminals showed after each step, and the bytes each was sent."""

    differences: dict[str, list[int]] = field(default_factory=dict)
    """Rows where the diffed terminal differed from the plain one, by step."""
    bytes_with_diff: int = 0
    bytes_without_diff: int = 0
    steady: list[Write] = field(default_factory=list)
    """What the diff did with each write once the first frame was shown."""
    line_feeds_kept: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    """Whether each pty (with the diff, without) passes line feeds as they are: as spawned,
    while the dashboards run, and once the diffing one has left."""
    stray_rows: set[int] = field(default_factory=set)
    """The rows that differed once another program wrote on the diffing terminal."""
    after_ctrl_l: list[str] = field(default_factory=list)
    """The rows that still differed after ctrl+L (``differences``)."""
    pen_moved: bool = False
    """Whether a diffed frame left the pen in a colour of its own."""
    ended: bool = False
    """Whether the diffing dashboard left on ``q``."""
    pen_default_after: bool = False
    """Whether the pen was back to the terminal's default once it had left."""


def wait_for_both(
    terminals: list[PtyTerminal],
    done: Callable[[PtyTerminal], bool],
    what: str,
    timeout_s: float = TIMEOUT_S,
) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(done(terminal) for terminal in terminals):
        if time.monotonic() > deadline or any(terminal.ended for terminal in terminals):
            screens = "\n\n".join(terminal.text() for terminal in terminals)
            pytest.fail(f"{what}: not shown within {timeout_s:g} s; the screens:\n{screens}")
        for terminal in terminals:
            terminal.pump(time.monotonic() + 0.02)


def wait_until_identical(with_diff: PtyTerminal, without_diff: PtyTerminal) -> list[int]:
    """Read both until their screens match cell for cell; the differing rows if they never do."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        rows = differing_rows(with_diff.cells(), without_diff.cells())
        if not rows:
            return []
        with_diff.pump(time.monotonic() + 0.02)
        without_diff.pump(time.monotonic() + 0.02)
    return differing_rows(with_diff.cells(), without_diff.cells())


def differences(with_diff: PtyTerminal, without_diff: PtyTerminal) -> list[str]:
    """``wait_until_identical``'s rows, each as both terminals show it (for the failure)."""
    rows = wait_until_identical(with_diff, without_diff)
    return [f"{y}: {t.lines()[y]!r}" for y in rows for t in (with_diff, without_diff)]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """Both dashboards driven through ``STEPS``; then another program writes on the diffing
    one's terminal and ctrl+L repaints it; then a diffed frame and ``q``: it leaves the
    terminal as it found it. (One pair of dashboards for all: each start costs seconds.)"""
    log = tmp_path_factory.mktemp("outcomes") / "writes.tsv"
    with_diff = dashboard(tmp_path_factory.mktemp("state-diff"), screen_diff=True, log=log)
    without_diff = dashboard(tmp_path_factory.mktemp("state-plain"), screen_diff=False)
    terminals = [with_diff, without_diff]
    result = Session()
    result.line_feeds_kept["as spawned"] = (
        _line_feeds_kept(with_diff),
        _line_feeds_kept(without_diff),
    )
    start_up = 0
    try:
        for step in STEPS:
            for terminal in terminals:
                if step.keys:
                    terminal.write(step.keys)
            wait_for_both(
                terminals,
                lambda terminal, step=step: step.shown(terminal.text()),
                step.name,
                PROBES_S if step is STEPS[0] else TIMEOUT_S,
            )
            result.differences[step.name] = wait_until_identical(with_diff, without_diff)
            if step is STEPS[0]:
                start_up = len(outcomes(log))
                result.line_feeds_kept["running"] = (
                    _line_feeds_kept(with_diff),
                    _line_feeds_kept(without_diff),
                )
        result.steady = outcomes(log)[start_up:]
        result.bytes_with_diff = with_diff.bytes_read
        result.bytes_without_diff = without_diff.bytes_read
        if not result.differences[STEPS[-1].name]:
            with_diff.feed_as_if_written(STRAY)
            # the stray rows differ now (another row may too, for a moment: one dashboard
            # can draw a refresh before the other)
            result.stray_rows = set(differing_rows(with_diff.cells(), without_diff.cells()))
            with_diff.write(CTRL_L)
            result.after_ctrl_l = differences(with_diff, without_diff)
        with_diff.write(DOWN)  # a diffed frame: the highlight moves
        result.pen_moved = with_diff.wait_for(lambda: not _pen_is_default(with_diff), TIMEOUT_S)
        with_diff.write(b"q")
        result.ended = with_diff.wait_for(lambda: with_diff.ended, TIMEOUT_S)
        result.line_feeds_kept["left"] = (
            _line_feeds_kept(with_diff),
            _line_feeds_kept(without_diff),
        )
        result.pen_default_after = _pen_is_default(with_diff)
        yield result
    finally:
        for terminal in terminals:
            terminal.stop()


@pytest.mark.parametrize("step", [step.name for step in STEPS])
def test_the_terminal_shows_exactly_what_textual_drew_with_the_screen_diff(
    session: Session, step: str
) -> None:
    assert session.differences[step] == [], f"rows that differ after '{step}'"


def test_the_screen_diff_sends_fewer_bytes_for_the_same_screens(session: Session) -> None:
    assert session.bytes_with_diff < session.bytes_without_diff, (
        f"{session.bytes_with_diff} bytes with the diff, {session.bytes_without_diff} without"
    )


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> list[Write]:
    """A diffing dashboard on a live clock: its writes over ``LIVE_FRAMES`` refreshes after
    the first frame."""
    log = tmp_path_factory.mktemp("outcomes-live") / "writes.tsv"
    terminal = dashboard(tmp_path_factory.mktemp("state-live"), True, log=log, frozen=False)
    try:
        wait_for_both([terminal], lambda t: first_frame(t.text()), "first frame", PROBES_S)
        start_up = len(outcomes(log))

        def refreshed() -> bool:
            return sum(w.outcome == DIFFED for w in outcomes(log)[start_up:]) >= LIVE_FRAMES

        if not terminal.wait_for(refreshed, TIMEOUT_S + LIVE_FRAMES):
            pytest.fail(f"fewer than {LIVE_FRAMES} refreshes: {outcomes(log)[start_up:]}")
        return outcomes(log)[start_up:]
    finally:
        terminal.stop()


def outcomes_of(writes: list[Write]) -> set[str]:
    found = {write.outcome for write in writes}
    assert found <= {DIFFED, UNCHANGED, WHOLE, NOT_FOLLOWED}
    return found


def test_once_the_first_frame_is_shown_every_frame_of_the_keys_is_followed(
    session: Session,
) -> None:
    """None falls back to Textual's output. Closing the help screen changes every cell: that
    frame may go whole (``WHOLE``), as nothing of it is on the terminal already."""
    assert sum(write.outcome == DIFFED for write in session.steady) >= len(STEPS) - 1
    assert NOT_FOLLOWED not in outcomes_of(session.steady)


def test_no_refresh_of_a_live_dashboard_passes_through_undiffed(live: list[Write]) -> None:
    assert outcomes_of(live) <= {DIFFED, UNCHANGED}, [write.outcome for write in live]


def test_a_refreshing_dashboard_is_sent_at_most_a_quarter_of_textuals_bytes(
    live: list[Write],
) -> None:
    textuals = sum(write.textual_bytes for write in live)
    sent = sum(write.sent_bytes for write in live)
    assert sent <= MOST_OF_TEXTUALS_BYTES * textuals, (
        f"{sent} bytes sent for Textual's {textuals} ({sent / textuals:.1%})"
    )


def test_ctrl_l_repaints_a_terminal_another_program_wrote_on(session: Session) -> None:
    assert session.differences[STEPS[-1].name] == []  # identical before the stray output
    assert {1, 2} <= session.stray_rows
    assert session.after_ctrl_l == []


def _line_feeds_kept(terminal: PtyTerminal) -> bool:
    """Whether the pty passes the app's line feeds as they are (ONLCR off); its master
    reads the settings of the side the app writes to."""
    output_flags = termios.tcgetattr(terminal.fd)[1]
    return not (output_flags & termios.OPOST and output_flags & termios.ONLCR)


def test_line_feeds_are_kept_while_the_diff_runs_and_the_terminal_is_given_back_as_it_was(
    session: Session,
) -> None:
    """The diff moves down a row with one line feed (ONLCR off, as curses' ``nonl``) only
    while the dashboard runs; the terminal's settings are back once it leaves, and
    ``GPUTOP_SCREEN_DIFF=0`` leaves them alone."""
    assert session.line_feeds_kept["as spawned"] == (False, False)
    assert session.line_feeds_kept["running"] == (True, False)
    assert session.ended
    assert session.line_feeds_kept["left"] == (False, False)


def _pen_is_default(terminal: PtyTerminal) -> bool:
    """Whether the terminal's pen (what it writes new text in) has no colour or attribute."""
    pen = terminal.screen.cursor.attrs
    return (pen.fg, pen.bg, pen.bold, pen.reverse) == ("default", "default", False, False)


def test_the_terminal_is_given_back_in_its_default_colours(session: Session) -> None:
    """A frame leaves the pen in its last colour, for the next frame to start from
    (docs/screen-diff.md); leaving the dashboard resets it, so the shell's prompt is not
    drawn in the dashboard's colours."""
    assert session.pen_moved
    assert session.ended
    assert session.pen_default_after
