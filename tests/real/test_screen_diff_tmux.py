"""The screen diff's moves on a real terminal emulator: tmux, through a real pty.

The unit tests replay the diff through pyte. Here the same kind of frames (a dashboard's:
figures changing in several colours, box characters, wide characters, the last column, a
sparkline's run shifted a cell) are written to two tmux panes, one as Textual writes them
and one as the diff rewrites them (relative moves, reverse index, column moves, line feeds
where the pty passes them as they are, shifted runs). Each pane's tty is set as the
dashboard's driver sets it (``ONLCR`` off where the diff uses line feeds), and after every
frame both panes must show the same characters in the same colours and attributes
(``capture-pane -e``). The tmux server runs on a socket in the test's directory.
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.real_components import cannot

from gputop.tui.screen_diff import HOME, ScreenDiff

TIMEOUT_S = 30.0
SIZE = (48, 12)
Cell = tuple[str, str]
NARROW = ["a", "b", "1", "7", " ", "%", "│", "─", "█", "▇", "▂"]
WIDE = "漢"
COLOURS = [
    "",
    "\x1b[38;2;255;0;0m",
    "\x1b[38;2;0;0;255;48;2;9;9;9m",
    "\x1b[1;3;38;2;0;255;0;48;2;9;9;9m",
    "\x1b[7;4m",
    "\x1b[38;5;208m",
]


def _row(rng: random.Random, columns: int) -> list[Cell]:
    row: list[Cell] = []
    wide = rng.random() < 0.3  # rows of one-cell characters only can be shifted
    while sum(2 if c == WIDE else 1 for c, _ in row) < columns:
        width = sum(2 if c == WIDE else 1 for c, _ in row)
        pool = [*NARROW, WIDE] if wide and width < columns - 1 else NARROW
        row.append((rng.choice(pool), rng.choice(COLOURS)))
    return row


def _frames(seed: int, count: int) -> list[list[list[Cell]]]:
    """A screen and ``count`` more, each a few cells from the last, some with a run shifted
    one cell left (a sparkline) and a new cell at its end."""
    rng = random.Random(seed)
    columns, rows = SIZE
    screen = [_row(rng, columns) for _ in range(rows)]
    frames = [screen]
    for _ in range(count):
        screen = [row[:] for row in screen]
        for _ in range(rng.randint(1, 14)):
            row = screen[rng.randrange(rows)]
            i = rng.randrange(len(row))
            pool = NARROW if row[i][0] != WIDE else [WIDE]
            row[i] = (rng.choice(pool), rng.choice(COLOURS))
        if rng.random() < 0.5:
            row = screen[rng.randrange(rows)]
            i = rng.randrange(len(row) - 1)
            j = rng.randint(min(i + 6, len(row) - 1), len(row) - 1)
            if all(char != WIDE for char, _ in row[i : j + 1]):
                row[i:j] = row[i + 1 : j + 1]
                row[j] = (rng.choice(NARROW), row[j - 1][1])
        frames.append(screen)
    return frames


def _textual(screen: list[list[Cell]], before: list[list[Cell]] | None) -> str:
    """As Textual writes a frame: each changed line from its start, a segment a colour."""
    out = []
    for y, row in enumerate(screen):
        if before is None or before[y] != row:
            out.append(f"\x1b[{y + 1};1H")
            out.extend(f"{sgr}{char}\x1b[0m" for char, sgr in row)
    return "".join(out) + HOME


class Tmux:
    def __init__(self, directory: Path) -> None:
        self.socket = directory / "tmux.sock"
        self.config = directory / "tmux.conf"
        self.config.write_text("set -g status off\n")
        self.env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        self.env["TERM"] = "xterm-256color"

    def __call__(self, *args: str) -> str:
        command = ["tmux", "-S", str(self.socket), "-f", str(self.config), *args]
        done = subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=TIMEOUT_S, check=True
        )
        return done.stdout

    def pane(self, name: str, stty: str, fifo: Path) -> None:
        """A pane whose tty is set by ``stty`` and shows what is written into ``fifo``; it
        signals ``name`` after each chunk it has copied to the terminal."""
        tmux = shlex.join(["tmux", "-S", str(self.socket)])
        script = (
            f"stty {stty} -echo; exec 3<>{shlex.quote(str(fifo))}; "
            f'while IFS= read -r n <&3; do head -c "$n" <&3; {tmux} wait-for -S {name}; done'
        )
        columns, rows = SIZE
        self("new-session", "-d", "-s", name, "-x", str(columns), "-y", str(rows))
        self("respawn-pane", "-k", "-t", name, "sh", "-c", script)

    def show(self, name: str, fifo: Path, data: str) -> str:
        """Write ``data`` to the pane and return what it shows once it is on the screen."""
        encoded = data.encode()
        waiter = subprocess.Popen(["tmux", "-S", str(self.socket), "wait-for", name], env=self.env)
        with fifo.open("wb") as pipe:
            pipe.write(b"%d\n" % len(encoded) + encoded)
        waiter.wait(timeout=TIMEOUT_S)
        return self("capture-pane", "-p", "-e", "-N", "-t", name)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        cannot("tmux is not installed")
    server = Tmux(tmp_path)
    yield server
    subprocess.run(
        ["tmux", "-S", str(server.socket), "kill-server"],
        env=server.env,
        capture_output=True,
        timeout=TIMEOUT_S,
    )


@pytest.mark.parametrize("line_feeds", [True, False], ids=["onlcr-off", "onlcr-on"])
def test_a_real_terminal_fed_the_diff_shows_what_textual_wrote(
    tmux: Tmux, tmp_path: Path, line_feeds: bool
) -> None:
    stty = "-onlcr" if line_feeds else "onlcr"
    fifos = {}
    for name in ("textual", "diffed"):
        fifos[name] = tmp_path / f"{name}.fifo"
        os.mkfifo(fifos[name], 0o600)
        tmux.pane(name, stty, fifos[name])
    diff = ScreenDiff()
    diff.line_feeds = line_feeds
    sent = {"textual": 0, "diffed": 0}
    before = None
    shown_before = ""
    for number, screen in enumerate(_frames(seed=44 + line_feeds, count=60)):
        data = _textual(screen, before)
        before = screen
        ours = diff.filter(data, SIZE)
        sent["textual"] += len(data.encode())
        sent["diffed"] += len(ours.encode())
        expected = tmux.show("textual", fifos["textual"], data)
        shown = tmux.show("diffed", fifos["diffed"], ours) if ours else shown_before
        assert shown == expected, f"frame {number} differs"
        shown_before = shown
    assert sent["diffed"] < sent["textual"] / 2
