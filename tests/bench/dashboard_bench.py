"""``make bench``: how fast the dashboard starts and how little it costs once running.

Runs ``gputop --fake dgx-h100`` (8 simulated H100s, about 200 processes) in a 200x50
pseudo-terminal (xterm-256color, truecolor) at a 1 s refresh, reads everything it writes
into a small terminal emulator, and measures:

- start-up: from spawning the process to the first *complete* frame, the moment a terminal
  fed the same bytes shows the status line, every card's readings, the PyTorch view, a
  process table filled to its bottom border and the footer; several starts after one untimed
  one (bytecode and disk caches as a user's would be): median and worst;
- CPU seconds per wall second of the process and its children, in steady state: once the
  cards' sparklines have filled up (about 50 s) and scroll every second;
- bytes written to the terminal per second, over the same window;
- peak RSS (VmHWM) of the dashboard process.

It prints each figure against its target and exits 1 if one is missed, so it is a check,
not a report. A benchmark, not a test: its name keeps pytest from collecting it. The
machine's other work shows in the CPU figure: run it more than once before trusting a change.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import fcntl
import json
import os
import platform
import pty
import re
import select
import signal
import statistics
import struct
import sys
import termios
import time
import unicodedata
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

COLUMNS, ROWS = 200, 50
SCENARIO = "dgx-h100"
GPU_COUNT = 8
HOST = "dgx-h100-07"
"""The scenario's hostname: the status line shows it once the first sample is in."""

TARGETS = {
    "startup_s": 0.7,
    "cpu_per_wall": 0.04,
    "bytes_per_s": 3 * 1024,
    "peak_rss_mb": 100.0,
}

PROCESS_ROW = re.compile(r"^\s*\d+\s+\d+\s+\S+\s+[CGM]\+?G?\s")
"""A process table row, inside its borders: GPU, PID, user, type (C, G, C+G, M...)."""


# -- a terminal that understands what Textual writes ---------------------------------------


class Screen:
    """Just enough of a VT100 to know what a person would see: cursor moves and text.

    Textual positions every line it writes with CUP (``ESC [ row ; col H``); colours and
    modes are ignored here. Input may be split anywhere, escape sequences and UTF-8 included.
    """

    def __init__(self, columns: int, rows: int) -> None:
        self.columns, self.rows = columns, rows
        self.cells = [[" "] * columns for _ in range(rows)]
        self.x = self.y = 0
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self._pending = ""

    def feed(self, data: bytes) -> None:
        text = self._pending + self._decode(data)
        self._pending = ""
        i, n = 0, len(text)
        while i < n:
            char = text[i]
            if char == "\x1b":
                end = _escape_end(text, i)
                if end is None:  # cut in the middle: wait for the rest
                    self._pending = text[i:]
                    return
                self._escape(text[i:end])
                i = end
                continue
            if char == "\r":
                self.x = 0
            elif char == "\n":
                self.y = min(self.y + 1, self.rows - 1)
            elif char >= " ":
                self._put(char)
            i += 1

    def lines(self) -> list[str]:
        return ["".join(row) for row in self.cells]

    def _put(self, char: str) -> None:
        wide = unicodedata.east_asian_width(char) in "WF"
        if self.x < self.columns and self.y < self.rows:
            self.cells[self.y][self.x] = char
            if wide and self.x + 1 < self.columns:
                self.cells[self.y][self.x + 1] = ""
        self.x += 2 if wide else 1

    def _escape(self, sequence: str) -> None:
        if not sequence.startswith("\x1b[") or sequence[2:3] in "?<=>":
            return
        final, parameters = sequence[-1], sequence[2:-1]
        numbers = [int(p) if p.isdigit() else 0 for p in parameters.split(";")]
        if final in "Hf":
            row = numbers[0] if numbers and numbers[0] else 1
            column = numbers[1] if len(numbers) > 1 and numbers[1] else 1
            self.y, self.x = min(row, self.rows) - 1, min(column, self.columns) - 1
        elif final == "J" and numbers[:1] == [2]:
            self.cells = [[" "] * self.columns for _ in range(self.rows)]


def _escape_end(text: str, start: int) -> int | None:
    """Where the escape sequence at ``start`` ends (exclusive), or None if it is cut."""
    if start + 1 >= len(text):
        return None
    kind = text[start + 1]
    if kind == "[":
        for j in range(start + 2, len(text)):
            if "\x40" <= text[j] <= "\x7e":
                return j + 1
        return None
    if kind in "]PX^_":  # OSC, DCS...: up to BEL or ST
        for j in range(start + 2, len(text)):
            if text[j] == "\x07":
                return j + 1
            if text[j] == "\x1b" and text[j + 1 : j + 2] == "\\":
                return j + 2
        return None
    return start + 2


def frame_is_complete(lines: list[str]) -> bool:
    """Every panel shows the first sample: what a person waits for before reading.

    The status line names the host, whole, once a sample is rendered; each card's last
    line ends in "MHz" (its clocks); the PyTorch view maps the last GPU; the process
    table's rows run from under its header down to its bottom border, each with a GPU, a
    PID, a user and a type; the footer names the keys.
    """
    if not lines or HOST not in lines[0] or "every 1 s" not in lines[0]:
        return False
    if "Quit" not in lines[-1] or not any(f"cuda:{GPU_COUNT - 1}" in line for line in lines):
        return False
    if sum(line.count(" MHz") for line in lines) < GPU_COUNT:
        return False
    header = next((i for i, line in enumerate(lines) if "PID" in line and "COMMAND" in line), None)
    if header is None:
        return False
    body = []
    for line in lines[header + 1 :]:
        if line.startswith("╰"):
            break
        body.append(line[1:])
    else:
        return False
    return bool(body) and all(PROCESS_ROW.match(row) for row in body)


# -- one dashboard in a pty ---------------------------------------------------------------


@dataclass
class Dashboard:
    """A gputop process on the slave side of a pty; the master side is read into ``screen``."""

    pid: int
    fd: int
    started: float
    screen: Screen = field(default_factory=lambda: Screen(COLUMNS, ROWS))
    bytes_read: int = 0
    ended: bool = False

    @classmethod
    def spawn(cls, command: list[str]) -> Dashboard:
        env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor")
        # As installed: bytecode cached (pip compiles it, Python writes it on a first run).
        for name in (
            "PYTHONDONTWRITEBYTECODE",
            "NO_COLOR",
            "TEXTUAL",
            "GPUTOP_FAKE_TIME",
            "CUDA_VISIBLE_DEVICES",
        ):
            env.pop(name, None)
        started = time.monotonic()
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its terminal; set its size before Textual asks
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
            try:
                os.execvpe(command[0], command, env)
            finally:
                os._exit(127)
        return cls(pid, fd, started)

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
                try:
                    data = os.read(self.fd, 1 << 16)
                except OSError:  # EIO: the child closed the terminal
                    data = b""
                if not data:
                    self.ended = True
                    break
                self.bytes_read += len(data)
                self.screen.feed(data)
        return done()

    def wait_for_first_frame(self, timeout_s: float) -> float | None:
        """Seconds from spawn to the first complete frame, or None after ``timeout_s``."""
        lines = self.screen.lines
        if self.pump(self.started + timeout_s, lambda: frame_is_complete(lines())):
            return time.monotonic() - self.started
        return None

    def cpu_seconds(self) -> float:
        """User + system time of the process, its reaped children and its live ones."""
        process = psutil.Process(self.pid)
        times = process.cpu_times()
        total = times.user + times.system + times.children_user + times.children_system
        for child in process.children(recursive=True):
            try:
                child_times = child.cpu_times()
            except psutil.Error:
                continue
            total += child_times.user + child_times.system
        return total

    def peak_rss_mb(self) -> float:
        status = Path(f"/proc/{self.pid}/status").read_text()
        kib = int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE).group(1))  # type: ignore[union-attr]
        return kib / 1024

    def stop(self) -> None:
        """``q`` as a person would quit; killed if it does not leave within two seconds."""
        with contextlib.suppress(OSError):
            os.write(self.fd, b"q")
        self.pump(time.monotonic() + 2.0, lambda: _reaped(self.pid))
        if not _reaped(self.pid):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


def _reaped(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


# -- the measurements ---------------------------------------------------------------------


@dataclass
class Results:
    startup_runs_s: list[float]
    startup_s: float
    startup_worst_s: float
    steady_window_s: float
    cpu_per_wall: float
    bytes_per_s: float
    peak_rss_mb: float
    command: list[str]
    machine: str


def measure(command: list[str], runs: int, warmup_s: float, window_s: float) -> Results:
    startups: list[float] = []
    steady: tuple[float, float, float, float] | None = None
    _untimed_start(command)
    for run in range(runs):
        dashboard = Dashboard.spawn(command)
        try:
            startup = dashboard.wait_for_first_frame(timeout_s=15.0)
            if startup is None:
                raise SystemExit(
                    f"run {run + 1}: no complete frame within 15 s; the screen showed:\n"
                    + "\n".join(dashboard.screen.lines())
                )
            startups.append(startup)
            print(f"  start-up run {run + 1}: {startup:.3f} s", flush=True)
            if run == 0:
                steady = _steady_state(dashboard, warmup_s, window_s)
        finally:
            dashboard.stop()
    assert steady is not None
    window, cpu, written, rss = steady
    return Results(
        startup_runs_s=[round(s, 4) for s in startups],
        startup_s=statistics.median(startups),
        startup_worst_s=max(startups),
        steady_window_s=window,
        cpu_per_wall=cpu / window,
        bytes_per_s=written / window,
        peak_rss_mb=rss,
        command=command,
        machine=f"{os.cpu_count()}-core {platform.machine()}, {platform.system()}",
    )


def _untimed_start(command: list[str]) -> None:
    """One start first, so that bytecode and the disk cache are as a user's would be."""
    dashboard = Dashboard.spawn(command)
    try:
        dashboard.wait_for_first_frame(timeout_s=15.0)
    finally:
        dashboard.stop()


def _steady_state(
    dashboard: Dashboard, warmup_s: float, window_s: float
) -> tuple[float, float, float, float]:
    """(window seconds, CPU seconds, bytes written, peak RSS MB) after a warm-up."""
    print(f"  steady state: {warmup_s:g} s warm-up, then {window_s:g} s", flush=True)
    dashboard.pump(time.monotonic() + warmup_s)
    cpu_before, bytes_before, wall_before = (
        dashboard.cpu_seconds(),
        dashboard.bytes_read,
        time.monotonic(),
    )
    dashboard.pump(wall_before + window_s)
    cpu_after, bytes_after, wall_after = (
        dashboard.cpu_seconds(),
        dashboard.bytes_read,
        time.monotonic(),
    )
    if dashboard.ended:
        raise SystemExit("the dashboard exited during the steady-state window")
    return (
        wall_after - wall_before,
        cpu_after - cpu_before,
        bytes_after - bytes_before,
        dashboard.peak_rss_mb(),
    )


def report(results: Results) -> bool:
    """Print target against measured figure; True when every target is met."""
    rows = [
        (
            "first complete frame",
            f"< {TARGETS['startup_s']:g} s",
            f"{results.startup_s:.2f} s (worst {results.startup_worst_s:.2f} s)",
            results.startup_s < TARGETS["startup_s"],
        ),
        (
            "CPU (process + children)",
            f"< {TARGETS['cpu_per_wall']:.0%} of a core",
            f"{results.cpu_per_wall:.1%}",
            results.cpu_per_wall < TARGETS["cpu_per_wall"],
        ),
        (
            "written to the terminal",
            f"< {TARGETS['bytes_per_s'] / 1024:g} KB/s",
            f"{results.bytes_per_s / 1024:.2f} KB/s",
            results.bytes_per_s < TARGETS["bytes_per_s"],
        ),
        (
            "peak RSS",
            f"< {TARGETS['peak_rss_mb']:g} MB",
            f"{results.peak_rss_mb:.0f} MB",
            results.peak_rss_mb < TARGETS["peak_rss_mb"],
        ),
    ]
    print(
        f"gputop --fake {SCENARIO}, {COLUMNS}x{ROWS} pty, 1 s refresh; "
        f"steady state over {results.steady_window_s:.0f} s; {results.machine}"
    )
    print(f"{'':26} {'target':>18} {'measured':>28}")
    for name, target, measured, ok in rows:
        print(f"{name:26} {target:>18} {measured:>28}  {'pass' if ok else 'FAIL'}")
    return all(ok for *_, ok in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="start-up runs (default 5)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=50.0,
        help="seconds before the window (default 50: the cards' sparklines fill up and scroll)",
    )
    parser.add_argument("--window", type=float, default=25.0, help="steady-state seconds")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    args = parser.parse_args(argv)
    # The package from the current directory (the checkout, under make), run by this Python.
    command = [sys.executable, "-m", "gputop", "--fake", SCENARIO, "--interval", "1"]
    results = measure(command, max(args.runs, 1), args.warmup, args.window)
    met = report(results)
    if args.json:
        args.json.write_text(json.dumps(asdict(results), indent=2) + "\n")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
