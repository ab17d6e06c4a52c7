"""``make bench``: what the dashboard costs on a busy server, against a bare Textual app.

The scenario is ``dgx-h100`` (8 simulated H100s, 200 GPU processes), but its processes are
real: one live, idle stand-in per GPU process (``stand_ins.py``), whose pid the simulated
GPUs report, so psutil reads live /proc entries every second as on a real server. In the
same run, against the same GPUs and processes, the bench measures two *floors*: the least a
Textual app does with the same samples (``floor_app.py``: one ``Static`` updated each
second from the same ``NvmlBackend``, gputop's sampler), and what any Textual program costs
that shows the same GPUs (``bare_app.py``: one ``Static``, a line per card, read from the
same simulated NVML with plain pynvml calls, no gputop code but the simulation's own). All
run in a 200x50 pseudo-terminal at a 1 s refresh, ``TERM=xterm-256color`` without
``COLORTERM``: the terminal an SSH session or tmux gives a program (neither passes
``COLORTERM`` on), in which Textual draws in 256 colours; everything they write is fed to a
terminal emulator (pyte, ``tests/helpers/pty_terminal.py``), and the bench measures:

- **first complete frame**: from spawning the process to the moment the terminal receives
  the bytes after which it shows every panel with the first sample (gputop: status line,
  every card's clocks, the PyTorch view, a process table filled to its bottom border, the
  footer; the floors: their figures for every GPU). As for key-to-screen, the time is taken
  when the bytes are read, and here the emulator never slows the app down: pyte, in
  Python, takes tens of milliseconds for a 30 KB frame that a real terminal draws in one,
  and a pty holds only a few KB, so reading and parsing in turns would time pyte, against
  the app that writes more (``PtyTerminal.wait_unthrottled``). One untimed start of each
  first (bytecode and disk caches as a user's), then ``--runs`` timed starts of each, taken
  in turns;
- **key-to-screen**: in each timed start, the time from writing a down-arrow key to the pty
  until the terminal shows its effect (gputop: the process table's highlight one row lower,
  after ``tab`` focused the table; the floors: their key count), at random moments between
  refreshes;
- **CPU** (process and children, % of one core), **bytes/s** written to the terminal and
  **peak RSS** (``VmHWM``), in ``--steady-runs`` runs of each app side by side: after a
  warm-up in which the cards' sparklines fill up (50 s), over a window (30 s). gputop is
  measured there a second time in a truecolor terminal (``COLORTERM=truecolor``, as a
  desktop terminal sets it), where each colour change is about 18 bytes instead of 11: the
  report's ``gputop truecolor`` column;
- **rows reordered**, in the same window: in how many of its seconds the
  first 20 rows of the process table changed order, read from the screen (the PID column of
  the rows under the table's header; nvitop's likewise). On the busy server every process's
  GPU memory moves every second (``busy_scenario.py``), so a table sorted by it that does
  not hold its order reorders in nearly every second (issue 44).

The dashboards start with a recorder's store present (issue 19): ``gputop record`` runs on
the same scenario through the whole bench, into the default store of a private state
directory that gputop is given too (``recorder_store.py``), so its sparklines start from the
store. nvitop (``--nvitop PYTHON``; ``make bench`` makes ``.venv-nvitop`` with a pinned
nvitop, never a dependency of gputop) runs on the same simulated GPUs (``nvitop_on_fake.py``).

Each figure is given as median (min-max) for gputop, both floors and nvitop, against the
targets of issues 11 and 19 (bytes: at most 1 KB/s and at most nvitop's median), or with
``--busy`` of issue 44 (``busy_report``); the first 20 rows reorder in at most 6 s. The
bench exits 1 when a target is missed: it is a check, not only a report. A benchmark, not a
test: its name keeps pytest from collecting it. CPU and start-up move with whatever else the
machine does: the load average is printed; run it more than once.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import platform
import random
import re
import select
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(Path(__file__).resolve().parent)]

import bare_app  # noqa: E402
from busy_scenario import busy  # noqa: E402
from floor_app import KEYS_LABEL  # noqa: E402
from helpers.pty_terminal import PtyTerminal  # noqa: E402
from recorder_store import RECORD_INTERVAL_S, recorder_store  # noqa: E402
from stand_ins import live_scenario  # noqa: E402

COLUMNS, ROWS = 200, 50
INTERVAL_S = 1.0
SCENARIO = REPO / "gputop" / "core" / "fake" / "scenarios" / "dgx-h100.json"
GPU_COUNT = 8
HOST = "dgx-h100-07"
DOWN, TAB = b"\x1b[B", b"\t"
DOWN_APPLICATION = b"\x1bOB"
"""The down arrow in the terminal's application cursor mode, which curses (nvitop) sets."""
FRAME_TIMEOUT_S = 20.0
KEY_TIMEOUT_S = 3.0

TARGET_CPU = 0.025
TARGET_BYTES_PER_S = 1024.0
TARGET_FRAME_OVER_FLOOR_S = 0.15
TARGET_RSS_OVER_FLOOR = 1.5
TARGET_KEY_MS = 30.0

BUSY_CPU_OVER_NVITOP = 0.2
BUSY_BYTES_OVER_NVITOP = 0.8
BUSY_FRAME_OVER_FLOOR = 1.5
BUSY_RSS_OVER_FLOOR = 1.4
"""Issue 44's targets on the busy server (``--busy``, ``busy_scenario.py``): CPU and bytes
against nvitop, first frame and peak RSS against the bare Textual app (``bare_app.py``),
all measured in the same run (issue 29's were CPU 0.3x nvitop's, and the frame and RSS
against the sampler's floor)."""
TOP_ROWS = 20
TARGET_REORDERS_S = 6
"""The first ``TOP_ROWS`` rows of the process table reorder in at most this many seconds
of the window (issue 44: of 30)."""

PROCESS_ROW = re.compile(r"^\s*\d+\s+\d+\s+\S+\s+[CGM]\+?G?\s")
"""A process table row, inside its borders: GPU, PID, user, type (C, G, C+G, M...)."""


# -- what each app shows -------------------------------------------------------------------


def gputop_frame_complete(lines: list[str]) -> bool:
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
    body = _table_body(lines)
    return bool(body) and all(PROCESS_ROW.match(lines[y][1:]) for y in body)


def _table_body(lines: list[str]) -> list[int]:
    """The screen rows of the process table's body; empty if it is not all drawn."""
    header = next((i for i, line in enumerate(lines) if "PID" in line and "COMMAND" in line), None)
    if header is None:
        return []
    for y in range(header + 1, len(lines)):
        if lines[y].startswith("╰"):
            return list(range(header + 1, y))
    return []


def gputop_cursor_row(terminal: PtyTerminal) -> int | None:
    """The process table row drawn in the cursor's colours: the one whose background no
    other body row has."""
    body = _table_body(terminal.lines())
    if len(body) < 3:
        return None
    backgrounds = {y: terminal.screen.buffer[y][2].bg for y in body}
    counts: dict[str, int] = {}
    for background in backgrounds.values():
        counts[background] = counts.get(background, 0) + 1
    unique = [y for y, background in backgrounds.items() if counts[background] == 1]
    return unique[0] if len(unique) == 1 else None


def gputop_top_rows(terminal: PtyTerminal) -> tuple[int, ...]:
    """The PIDs of the process table's first ``TOP_ROWS`` rows, top down, as shown."""
    lines = terminal.lines()
    pids = []
    for y in _table_body(lines)[:TOP_ROWS]:
        if not PROCESS_ROW.match(lines[y][1:]):
            break
        pids.append(int(lines[y][1:].split()[1]))
    return tuple(pids)


def floor_frame_complete(lines: list[str]) -> bool:
    text = "\n".join(lines)
    return (
        HOST in lines[0]
        and all(f"GPU {i} " in text for i in range(GPU_COUNT))
        and f"{KEYS_LABEL} 0" in text
    )


def bare_frame_complete(lines: list[str]) -> bool:
    text = "\n".join(lines)
    return (
        lines[0].startswith(bare_app.TITLE)
        and all(f"GPU {i} " in text for i in range(GPU_COUNT))
        and f"{bare_app.KEYS_LABEL} 0" in text
    )


@dataclass(frozen=True)
class Subject:
    """An app under measurement: how to start it, and how to read its screen."""

    name: str
    command: list[str]
    frame_complete: Callable[[list[str]], bool]
    focus_keys: bytes
    """Keys that give the down arrow something to move."""
    key_position: Callable[[PtyTerminal], int | None]
    """Where the down arrows have got to, as the screen shows it."""
    down_key: bytes = DOWN
    """The down arrow as the terminal sends it to this app."""
    environ: tuple[tuple[str, str], ...] = ()
    """Variables set for this app on top of the bench's own."""
    top_rows: Callable[[PtyTerminal], tuple[int, ...]] | None = None
    """The PIDs of its process table's first rows as shown (None: it has no such table)."""


def subjects(scenario: Path, state_dir: Path) -> tuple[Subject, Subject, Subject]:
    """gputop, whose state directory holds a recorder's store (``recorder_store.py``), the
    sampler's floor and the bare Textual app."""
    interval = ["--interval", f"{INTERVAL_S:g}"]
    gputop = Subject(
        "gputop",
        [sys.executable, "-m", "gputop", "--fake", str(scenario), *interval],
        gputop_frame_complete,
        TAB,
        gputop_cursor_row,
        environ=(("GPUTOP_STATE_DIR", str(state_dir)),),
        top_rows=gputop_top_rows,
    )
    floor = Subject(
        "floor",
        [sys.executable, str(Path(__file__).with_name("floor_app.py")), str(scenario), *interval],
        floor_frame_complete,
        b"",
        _floor_keys_pressed,
    )
    bare = Subject(
        "bare",
        [sys.executable, str(Path(__file__).with_name("bare_app.py")), str(scenario), *interval],
        bare_frame_complete,
        b"",
        _floor_keys_pressed,
    )
    return gputop, floor, bare


NVITOP_PROCESS_ROW = re.compile(r"^│\s+\d+\s+\d+ [CGX]")


def nvitop_frame_complete(lines: list[str]) -> bool:
    """Every card's power reading, and process rows under the "Processes:" header."""
    text = "\n".join(lines)
    rows = sum(1 for line in lines if NVITOP_PROCESS_ROW.match(line))
    return "Processes:" in text and text.count("W / ") >= GPU_COUNT and rows >= 10


def nvitop_top_rows(terminal: PtyTerminal) -> tuple[int, ...]:
    """The PIDs of nvitop's first ``TOP_ROWS`` process rows, top down."""
    rows = [line for line in terminal.lines() if NVITOP_PROCESS_ROW.match(line)]
    return tuple(int(line[1:].split()[1]) for line in rows[:TOP_ROWS])


def nvitop_selected_row(terminal: PtyTerminal) -> int | None:
    """The process row nvitop draws in reverse video: its selection."""
    selected = [
        y
        for y, line in enumerate(terminal.lines())
        if NVITOP_PROCESS_ROW.match(line) and terminal.screen.buffer[y][3].reverse
    ]
    return selected[0] if len(selected) == 1 else None


def nvitop_subject(python: str, scenario: Path) -> Subject:
    """nvitop run by ``python`` (which has it installed) on the same simulated GPUs."""
    shim = str(Path(__file__).with_name("nvitop_on_fake.py"))
    return Subject(
        "nvitop",
        [python, shim, str(scenario), "--interval", f"{INTERVAL_S:g}"],
        nvitop_frame_complete,
        DOWN_APPLICATION,  # selects the first process
        nvitop_selected_row,
        DOWN_APPLICATION,
        top_rows=nvitop_top_rows,
    )


def _floor_keys_pressed(terminal: PtyTerminal) -> int | None:
    """Either floor's count of down arrows (both say it in the same words)."""
    assert bare_app.KEYS_LABEL == KEYS_LABEL
    match = re.search(rf"{KEYS_LABEL} (\d+)", terminal.text())
    return int(match.group(1)) if match else None


# -- running an app in a pty ---------------------------------------------------------------


def spawn(subject: Subject) -> PtyTerminal:
    env = dict(os.environ, TERM="xterm-256color")
    # As installed: bytecode cached (pip compiles it, Python writes it on a first run).
    for name in (
        "COLORTERM",  # as over SSH and in tmux: a subject sets it to measure truecolor
        "PYTHONDONTWRITEBYTECODE",
        "NO_COLOR",
        "TEXTUAL",
        "GPUTOP_FAKE_TIME",
        "GPUTOP_SCREEN_DIFF",
        "CUDA_VISIBLE_DEVICES",
    ):
        env.pop(name, None)
    env.update(subject.environ)
    return PtyTerminal.spawn(subject.command, env, COLUMNS, ROWS)


def in_truecolor(subject: Subject) -> Subject:
    """``subject`` in a terminal that says it takes 24-bit colour (``COLORTERM``)."""
    return dataclasses.replace(
        subject,
        name=f"{subject.name} truecolor",
        environ=(*subject.environ, ("COLORTERM", "truecolor")),
    )


def wait_for_frame(subject: Subject, terminal: PtyTerminal) -> float:
    """Seconds from spawn to the read that completed the first frame."""
    read_at = terminal.wait_unthrottled(
        lambda: subject.frame_complete(terminal.lines()), FRAME_TIMEOUT_S
    )
    if read_at is not None:
        return read_at - terminal.started
    raise SystemExit(
        f"{subject.name}: no complete frame within {FRAME_TIMEOUT_S:g} s; the screen showed:\n"
        + terminal.text()
    )


def key_latencies_ms(
    subject: Subject, terminal: PtyTerminal, presses: int, rng: random.Random
) -> list[float]:
    """Milliseconds from each down arrow written to the pty to its effect on the screen."""
    if subject.focus_keys:
        terminal.write(subject.focus_keys)
    position = terminal.wait_for(lambda: subject.key_position(terminal) is not None, 5.0)
    terminal.pump(time.monotonic() + 0.3)  # let the focus change settle
    start = subject.key_position(terminal)
    if not position or start is None:
        raise SystemExit(f"{subject.name}: no key position on the screen:\n{terminal.text()}")
    latencies = []
    for press in range(1, presses + 1):
        terminal.pump(time.monotonic() + rng.uniform(0.2, 0.7))  # any moment of a refresh
        written = time.monotonic()
        terminal.write(subject.down_key)
        expected = start + press
        if not terminal.wait_for(lambda e=expected: subject.key_position(terminal) == e, 3.0):
            raise SystemExit(
                f"{subject.name}: key {press} not shown within {KEY_TIMEOUT_S:g} s "
                f"(position {subject.key_position(terminal)}, expected {expected})"
            )
        latencies.append((terminal.last_read_at - written) * 1000)
    return latencies


def cpu_seconds(pid: int) -> float:
    """User + system time of the process, its reaped children and its live ones."""
    process = psutil.Process(pid)
    times = process.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in process.children(recursive=True):
        try:
            child_times = child.cpu_times()
        except psutil.Error:
            continue
        total += child_times.user + child_times.system
    return total


def peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    assert match is not None
    return int(match.group(1)) / 1024


def pump_all(terminals: list[PtyTerminal], until: float) -> None:
    """Read every terminal's output until the monotonic time ``until``."""
    while (left := until - time.monotonic()) > 0:
        live = {t.fd: t for t in terminals if not t.ended}
        if not live:
            return
        ready, _, _ = select.select(list(live), [], [], min(left, 0.1))
        for fd in ready:
            live[fd].read_available()


# -- the measurements ------------------------------------------------------------------------


@dataclass
class Figures:
    """One app's measurements: a value per run."""

    first_frame_s: list[float] = field(default_factory=list)
    key_to_screen_ms: list[float] = field(default_factory=list)
    cpu_per_wall: list[float] = field(default_factory=list)
    bytes_per_s: list[float] = field(default_factory=list)
    peak_rss_mib: list[float] = field(default_factory=list)
    reorder_seconds: list[float] = field(default_factory=list)
    """Per steady copy: the seconds of the window in which its first rows changed order."""


def measure_starts(
    pair: tuple[Subject, ...], runs: int, presses: int, results: dict[str, Figures]
) -> None:
    """One untimed start of each, then ``runs`` timed starts of each, in turns."""
    rng = random.Random(11)
    for subject in pair:
        terminal = spawn(subject)
        try:
            wait_for_frame(subject, terminal)
        finally:
            terminal.stop()
    for run in range(1, runs + 1):
        for subject in pair:
            terminal = spawn(subject)
            try:
                frame_s = wait_for_frame(subject, terminal)
                keys = key_latencies_ms(subject, terminal, presses, rng)
            finally:
                terminal.stop()
            figures = results[subject.name]
            figures.first_frame_s.append(frame_s)
            figures.key_to_screen_ms.extend(keys)
            print(
                f"  start {run} {subject.name:6}: first frame {frame_s:.3f} s, "
                f"key-to-screen {', '.join(f'{k:.0f}' for k in keys)} ms",
                flush=True,
            )


def measure_steady(
    pair: tuple[Subject, ...],
    runs: int,
    warmup_s: float,
    window_s: float,
    results: dict[str, Figures],
) -> None:
    """``runs`` copies of each app side by side: CPU, bytes and peak RSS over a window."""
    print(f"  steady state: {runs} of each side by side, {warmup_s:g} s warm-up, {window_s:g} s")
    running = [(subject, spawn(subject)) for _ in range(runs) for subject in pair]
    terminals = [terminal for _, terminal in running]
    try:
        for subject, terminal in running:
            wait_for_frame(subject, terminal)
        pump_all(terminals, time.monotonic() + warmup_s)
        before = [(cpu_seconds(t.pid), t.bytes_read, time.monotonic()) for t in terminals]
        reordered = watch_order(running, time.monotonic() + window_s)
        for (subject, terminal), (cpu, written, wall) in zip(running, before, strict=True):
            if terminal.ended:
                raise SystemExit(f"{subject.name} exited during the steady-state window")
            elapsed = time.monotonic() - wall
            figures = results[subject.name]
            figures.cpu_per_wall.append((cpu_seconds(terminal.pid) - cpu) / elapsed)
            figures.bytes_per_s.append((terminal.bytes_read - written) / elapsed)
            figures.peak_rss_mib.append(peak_rss_mib(terminal.pid))
            if subject.top_rows is not None:
                figures.reorder_seconds.append(reordered[terminal.pid])
    finally:
        for terminal in terminals:
            terminal.stop()


ORDER_READ_S = 0.1
"""How often the window reads each table's first rows off the screen."""


def watch_order(running: list[tuple[Subject, PtyTerminal]], until: float) -> dict[int, float]:
    """Read every terminal until ``until``; per app with a process table (by pid), in how
    many whole seconds of the time its first ``TOP_ROWS`` rows changed order.

    A reorder is the PIDs of those rows, top down, differing from the last reading; a
    frame half written shows its rows half moved, which is a reorder too, and only when
    rows move: a moving reading leaves the PID column as it was.
    """
    started = time.monotonic()
    watched = [(s.top_rows, t) for s, t in running if s.top_rows is not None]
    last = {t.pid: read(t) for read, t in watched}
    seconds: dict[int, set[int]] = {t.pid: set() for _, t in watched}
    while time.monotonic() < until:
        pump_all([t for _, t in running], min(until, time.monotonic() + ORDER_READ_S))
        second = int(time.monotonic() - started)
        for read, terminal in watched:
            rows = read(terminal)
            if rows and last[terminal.pid] and rows != last[terminal.pid]:
                seconds[terminal.pid].add(second)
            if rows:
                last[terminal.pid] = rows
    whole = max(int(until - started), 1)  # a change read in the last slice past it: left out
    return {pid: float(sum(s < whole for s in marked)) for pid, marked in seconds.items()}


# -- the report ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One figure: each app's median (min-max), and gputop's target."""

    name: str
    by_app: dict[str, str]
    target: str
    met: bool


def spread(values: list[float], unit: str, scale: float = 1.0, digits: int = 2) -> str:
    if not values:
        return "-"
    scaled = [v * scale for v in values]
    return (
        f"{statistics.median(scaled):.{digits}f} {unit} "
        f"({min(scaled):.{digits}f}-{max(scaled):.{digits}f})"
    )


FIGURES: tuple[tuple[str, Callable[[Figures], list[float]], tuple[object, ...]], ...] = (
    ("first complete frame", lambda x: x.first_frame_s, ("s",)),
    ("CPU, % of a core", lambda x: x.cpu_per_wall, ("%", 100, 1)),
    ("bytes to the terminal", lambda x: x.bytes_per_s, ("KB/s", 1 / 1024)),
    ("peak RSS", lambda x: x.peak_rss_mib, ("MiB", 1, 0)),
    ("key-to-screen", lambda x: x.key_to_screen_ms, ("ms", 1, 0)),
    (f"first {TOP_ROWS} rows reordered", lambda x: x.reorder_seconds, ("s", 1, 0)),
)
"""Each figure the report shows: its name, where it is kept, how it is printed."""


def _rows(results: dict[str, Figures], targets: list[tuple[float, str]]) -> list[Row]:
    """A row per figure (in ``FIGURES``' order): every app's spread, and whether gputop's
    median is within its limit (``targets``: limit and how it reads, per figure)."""
    rows = []
    for (name, pick, style), (limit, text) in zip(FIGURES, targets, strict=True):
        shown = {app: spread(pick(figures), *style) for app, figures in results.items()}  # type: ignore[arg-type]
        rows.append(Row(name, shown, text, statistics.median(pick(results["gputop"])) <= limit))
    return rows


def report(results: dict[str, Figures]) -> list[Row]:
    """Each figure for every app measured, and whether gputop meets its target.

    Bytes: at most ``TARGET_BYTES_PER_S`` (issue 11) and, where nvitop is measured, at most
    nvitop's median (issue 19)."""
    f = results["floor"]
    frame_limit = statistics.median(f.first_frame_s) + TARGET_FRAME_OVER_FLOOR_S
    rss_limit = statistics.median(f.peak_rss_mib) * TARGET_RSS_OVER_FLOOR
    bytes_limit, bytes_source = TARGET_BYTES_PER_S, ""
    nvitop = results.get("nvitop")
    if nvitop is not None and nvitop.bytes_per_s:  # issue 19: at or below nvitop's
        bytes_limit = min(bytes_limit, statistics.median(nvitop.bytes_per_s))
        bytes_source = " (nvitop)" if bytes_limit < TARGET_BYTES_PER_S else ""
    return _rows(
        results,
        [
            (frame_limit, f"<= floor + {TARGET_FRAME_OVER_FLOOR_S:g} s = {frame_limit:.2f} s"),
            (TARGET_CPU, f"<= {TARGET_CPU:.1%}"),
            (bytes_limit, f"<= {bytes_limit / 1024:.2f} KB/s{bytes_source}"),
            (rss_limit, f"<= {TARGET_RSS_OVER_FLOOR:g}x floor = {rss_limit:.0f} MiB"),
            (TARGET_KEY_MS, f"<= {TARGET_KEY_MS:g} ms median"),
            (TARGET_REORDERS_S, f"<= {TARGET_REORDERS_S} s of the window"),
        ],
    )


def busy_report(results: dict[str, Figures]) -> list[Row]:
    """Issue 44's targets on the busy server: each a ratio to nvitop or to the bare Textual
    app of the same run (the ratio to the sampler's floor said beside it); key-to-screen as
    on the standard case; the first rows reordered in at most ``TARGET_REORDERS_S`` s."""
    g, f, b, n = results["gputop"], results["floor"], results["bare"], results["nvitop"]
    median = statistics.median

    def against(pick: Callable[[Figures], list[float]], base: Figures, times: float) -> float:
        return median(pick(base)) * times

    def ratio(pick: Callable[[Figures], list[float]], base: Figures) -> str:
        below = median(pick(base))
        return f"is {median(pick(g)) / below:.2f}x" if below > 0 else "-"

    (_, frame, _), (_, cpu, _), (_, written, _), (_, rss, _), _, _ = FIGURES
    frame_limit = against(frame, b, BUSY_FRAME_OVER_FLOOR)
    cpu_limit = against(cpu, n, BUSY_CPU_OVER_NVITOP)
    bytes_limit = against(written, n, BUSY_BYTES_OVER_NVITOP)
    rss_limit = against(rss, b, BUSY_RSS_OVER_FLOOR)
    return _rows(
        results,
        [
            (
                frame_limit,
                f"<= {BUSY_FRAME_OVER_FLOOR:g}x bare = {frame_limit:.2f} s ({ratio(frame, b)}; "
                f"floor: {ratio(frame, f)})",
            ),
            (cpu_limit, f"<= {BUSY_CPU_OVER_NVITOP:g}x nvitop = {cpu_limit:.1%} ({ratio(cpu, n)})"),
            (
                bytes_limit,
                f"<= {BUSY_BYTES_OVER_NVITOP:g}x nvitop = {bytes_limit / 1024:.2f} KB/s "
                f"({ratio(written, n)})",
            ),
            (
                rss_limit,
                f"<= {BUSY_RSS_OVER_FLOOR:g}x bare = {rss_limit:.0f} MiB ({ratio(rss, b)}; "
                f"floor: {ratio(rss, f)})",
            ),
            (TARGET_KEY_MS, f"<= {TARGET_KEY_MS:g} ms median"),
            (TARGET_REORDERS_S, f"<= {TARGET_REORDERS_S} s of the window"),
        ],
    )


def print_report(rows: list[Row], header: str) -> None:
    print(header)
    apps = list(rows[0].by_app)
    titles = {"floor": "floor (sampler)", "bare": "bare Textual"}
    print(f"{'':22}" + "".join(f" {titles.get(a, a):>24}" for a in apps) + "   target (gputop)")
    for row in rows:
        figures = "".join(f" {row.by_app[a]:>24}" for a in apps)
        print(f"{row.name:22}{figures}   {row.target:<30} {'met' if row.met else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed starts of each (default 5)")
    parser.add_argument("--keys", type=int, default=5, help="down arrows per start (default 5)")
    parser.add_argument(
        "--steady-runs", type=int, default=3, help="steady-state copies of each (default 3)"
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=50.0,
        help="seconds before the window (default 50: the cards' sparklines fill up and scroll)",
    )
    parser.add_argument(
        "--window",
        type=float,
        default=30.0,
        help="steady-state seconds, in which the rows reordered are counted too (default 30)",
    )
    parser.add_argument(
        "--nvitop",
        metavar="PYTHON",
        help="also measure nvitop, run by this Python (one with nvitop installed)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    parser.add_argument(
        "--busy",
        action="store_true",
        help="the busy server of issues 29 and 44: every reading moves every second, each "
        "process's GPU memory too, each process has its own CUDA_VISIBLE_DEVICES "
        "(busy_scenario.py); targets against nvitop and the bare Textual app of the same "
        "run (needs --nvitop)",
    )
    args = parser.parse_args(argv)
    if args.busy and not args.nvitop:
        parser.error("--busy measures against nvitop: give --nvitop PYTHON")
    load_before = os.getloadavg()
    transform = busy if args.busy else None
    with (
        live_scenario(SCENARIO, transform) as (scenario, stand_ins),
        recorder_store(scenario) as state,
    ):
        print(f"  {stand_ins} live stand-in processes for the scenario's GPU processes")
        print(f"  gputop record every {RECORD_INTERVAL_S:g} s into gputop's store ({state})")
        apps: tuple[Subject, ...] = subjects(scenario, state)
        if args.nvitop:
            apps = (*apps, nvitop_subject(args.nvitop, scenario))
        results = {app.name: Figures() for app in apps}
        measure_starts(apps, max(args.runs, 1), max(args.keys, 1), results)
        steady = (*apps, in_truecolor(apps[0]))
        results[steady[-1].name] = Figures()
        measure_steady(steady, max(args.steady_runs, 1), args.warmup, args.window, results)
    load_after = os.getloadavg()
    header = (
        f"dgx-h100{' (busy: every reading moves, process memory too)' if args.busy else ''} "
        f"with {stand_ins} "
        f"live GPU processes, {COLUMNS}x{ROWS} pty, "
        f"{INTERVAL_S:g} s refresh; {args.runs} starts, {args.steady_runs} steady runs of "
        f"{args.window:g} s after {args.warmup:g} s, side by side; median (min-max)\n"
        f"{os.cpu_count()}-core {platform.machine()}, Python {platform.python_version()}, "
        f"Textual {importlib.metadata.version('textual')}; "
        f"load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after"
    )
    rows = busy_report(results) if args.busy else report(results)
    print_report(rows, header)
    if args.json:
        data = {"header": header, "figures": {k: asdict(v) for k, v in results.items()}}
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0 if all(row.met for row in rows) else 1


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # the stand-ins and the apps are gone by now
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
