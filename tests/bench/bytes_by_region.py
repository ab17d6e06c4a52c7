"""Where a dashboard's bytes to the terminal go: ``python tests/bench/bytes_by_region.py``.

Runs gputop and nvitop (``--nvitop PYTHON``) side by side on the bench's scenario
(``dashboard_bench.py``: dgx-h100, live stand-ins, a recorder's store, 200x50 pty), and over
a steady window attributes every byte each one writes to the screen cell it lands on,
following the cursor through its moves: cursor moves, colour (SGR) sequences and text, by
screen region (gputop: the status line, each line of the cards, each column of the process
table, the PyTorch view, the key bar; nvitop: its bands of rows). A tool for finding what
to cut (docs/speed.md, "Bytes to the terminal"), not a check: it prints and exits 0.

``--record FILE`` also keeps what Textual gave gputop's screen diff (every write, with the
terminal's size), and ``--replay FILE`` feeds such a recording through this tree's
``ScreenDiff``: two versions of the diff compared on exactly the same frames, bytes by kind
over the recording's window, and (``--check``) every write's result on an emulated terminal
compared, cell by cell, with what Textual's own bytes show there.
"""

from __future__ import annotations

import argparse
import codecs
import dataclasses
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import pyte  # noqa: E402
from busy_scenario import busy  # noqa: E402
from dashboard_bench import (  # noqa: E402
    SCENARIO,
    in_truecolor,
    nvitop_subject,
    pump_all,
    spawn,
    subjects,
    wait_for_frame,
)
from helpers.pty_terminal import PtyTerminal  # noqa: E402
from recorder_store import recorder_store  # noqa: E402
from rich.cells import cell_len  # noqa: E402
from stand_ins import live_scenario  # noqa: E402

from gputop.tui.screen_diff import ScreenDiff  # noqa: E402

RECORDING = """
import json, runpy, sys, time
from gputop.tui import screen_diff
log = open(sys.argv.pop(1), "w", encoding="utf-8")
diff_frame = screen_diff.ScreenDiff.filter
def recorded(self, data, size):
    log.write(json.dumps([time.monotonic(), size, self.line_feeds, data]) + "\\n")
    return diff_frame(self, data, size)
screen_diff.ScreenDiff.filter = recorded
sys.argv[0] = "gputop"
runpy.run_module("gputop", run_name="__main__", alter_sys=True)
"""
"""``python -m gputop`` keeping every write given to its screen diff: one JSON array a
line (monotonic time, the terminal's size, ``line_feeds``, the data)."""

_TOKEN = re.compile(
    r"\x1b\[(?P<private>[?<>=]?)(?P<params>[0-9;:]*)[ $]?(?P<final>[@-~])"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[()][0-9A-Za-z]|\x1b[^\[\]()]"
    r"|(?P<control>[\x00-\x1a\x1c-\x1f\x7f])"
    r"|(?P<text>[^\x00-\x1f\x7f\x1b]+)"
)


class ByteMap:
    """Follows the cursor through what a program writes; bytes by (kind, row, column)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self.y = self.x = 0
        self.bytes: Counter[tuple[str, int, int]] = Counter()

    def feed(self, data: bytes) -> None:
        text = self._pending + self._decoder.decode(data)
        position = 0
        for match in _TOKEN.finditer(text):
            if match.start() != position:  # a sequence that goes on in the next read
                break
            position = match.end()
            self._token(match)
        self._pending = text[position:]

    def _token(self, match: re.Match[str]) -> None:
        size = len(match.group(0).encode())
        text = match.group("text")
        if text is not None:
            for char in text:
                self.bytes["text", self.y, self.x] += len(char.encode())
                self.x += 1 if char.isascii() else cell_len(char)
            return
        final, control = match.group("final"), match.group("control")
        kind = "other"
        if final is not None and not match.group("private"):
            params = [int(p) if p.isdigit() else 0 for p in match.group("params").split(";")]
            first = params[0] or 1
            if final in "Hf":
                self.y, self.x = first - 1, (params[1] if len(params) > 1 else 1) - 1
                self.x = max(self.x, 0)
                kind = "move"
            elif final in "ABCDGd":
                self.y += {"A": -first, "B": first}.get(final, 0)
                self.x += {"C": first, "D": -first}.get(final, 0)
                self.x = first - 1 if final == "G" else self.x
                self.y = first - 1 if final == "d" else self.y
                kind = "move"
            elif final == "m":
                kind = "sgr"
        elif match.group(0) == "\x1bM":  # reverse index: a row up
            self.y -= 1
            kind = "move"
        elif control is not None:
            kind = "move"
            if control == "\r":
                self.x = 0
            elif control == "\n":
                self.y += 1
            elif control == "\b":
                self.x = max(self.x - 1, 0)
        self.bytes[kind, self.y, self.x] += size


def gputop_region(lines: list[str]) -> Callable[[int, int], str]:
    """Names a cell of gputop's screen: status, a card's line, a process column, ..."""
    header = next((y for y, line in enumerate(lines) if "PID" in line and "COMMAND" in line), 0)
    table_end = lines[header].find("╮") if header else -1
    columns = [(m.start(), m.group(0)) for m in re.finditer(r"\S+(?: \S+)?", lines[header])]
    card_lines = ("border", "name", "GPU bar", "sparkline", "MEM bar", "temp/power", "clocks")
    # the status line, then the host line (uptime, load, memory), then the cards
    first_card = next((y for y, line in enumerate(lines) if line.startswith("╭")), 1)

    def region(y: int, x: int) -> str:
        if y == 0:
            return "status line"
        if y == len(lines) - 1:
            return "key bar"
        if 0 < y < first_card:
            return "host line"
        if first_card <= y < header - 1:
            return "card " + card_lines[min((y - first_card) % 8, 6)]
        if y >= header - 1 and x > table_end >= 0:
            return "PyTorch view"
        if y > header:
            name = next((n for start, n in reversed(columns) if x >= start - 1), "border")
            return "process " + name
        return "process header"

    return region


def nvitop_region(lines: list[str]) -> Callable[[int, int], str]:
    """Names a band of nvitop's screen: clock, GPU rows and their bars, host, processes."""
    processes = next((y for y, line in enumerate(lines) if "Processes:" in line), len(lines))
    bars = lines[6].find("MEM:") if len(lines) > 6 else -1

    def region(y: int, x: int) -> str:
        if y == 0:
            return "clock line"
        if y < 5:
            return "header"
        if y < 22:
            return "GPU bars" if 0 <= bars <= x else "GPU figures"
        if y < processes - 1:
            return "host CPU/MEM"
        return "processes"

    return region


def report(name: str, byte_map: ByteMap, seconds: float, region: Callable[[int, int], str]) -> None:
    by_region: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    for (kind, y, x), count in byte_map.bytes.items():
        by_region[region(y, x)] += count
        by_kind[kind] += count
    total = sum(by_kind.values())
    print(f"{name}: {total / seconds / 1024:.2f} KB/s over {seconds:.0f} s")
    kinds = ", ".join(f"{k} {v / seconds:.0f}" for k, v in by_kind.most_common())
    print(f"  by kind (B/s): {kinds}")
    for label, count in by_region.most_common():
        print(f"  {label:28} {count / seconds:7.0f} B/s  {count / total:6.1%}")


def report_rows(byte_map: ByteMap, seconds: float, lines: list[str], top: int) -> None:
    """The ``top`` screen rows by bytes, with what they show."""
    by_row: Counter[int] = Counter()
    for (_, y, _), count in byte_map.bytes.items():
        by_row[y] += count
    for y, count in by_row.most_common(top):
        shown = lines[y][:110] if 0 <= y < len(lines) else "(off the screen)"
        print(f"  row {y:2} {count / seconds:6.0f} B/s  {shown}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nvitop", metavar="PYTHON", help="a Python with nvitop installed")
    parser.add_argument("--warmup", type=float, default=50.0)
    parser.add_argument("--window", type=float, default=25.0)
    parser.add_argument("--rows", type=int, default=0, help="also the N busiest screen rows")
    parser.add_argument(
        "--busy", action="store_true", help="the busy server (busy_scenario.py, issue 29)"
    )
    parser.add_argument(
        "--truecolor", action="store_true", help="gputop in a truecolor terminal (COLORTERM)"
    )
    parser.add_argument("--record", metavar="FILE", help="keep what gputop's diff was given")
    parser.add_argument("--replay", metavar="FILE", help="feed a recording through the diff")
    parser.add_argument(
        "--check", action="store_true", help="with --replay: compare every write's screen"
    )
    args = parser.parse_args(argv)
    if args.replay:
        return replay(Path(args.replay), args.check)
    transform = busy if args.busy else None
    with (
        live_scenario(SCENARIO, transform) as (scenario, _),
        recorder_store(scenario) as state_dir,
    ):
        gputop = subjects(scenario, state_dir)[0]
        if args.record:
            options = gputop.command[3:]  # python -m gputop ...
            command = [sys.executable, "-c", RECORDING, args.record, *options]
            gputop = dataclasses.replace(gputop, command=command)
        apps = [in_truecolor(gputop) if args.truecolor else gputop]
        if args.nvitop:
            apps.append(nvitop_subject(args.nvitop, scenario))
        running = [(app, spawn(app)) for app in apps]
        terminals = [terminal for _, terminal in running]
        maps = {app.name: ByteMap() for app in apps}
        try:
            for app, terminal in running:
                wait_for_frame(app, terminal)
            pump_all(terminals, time.monotonic() + args.warmup)
            for app, terminal in running:
                _tap(terminal, maps[app.name])
            started = time.monotonic()
            pump_all(terminals, started + args.window)
            seconds = time.monotonic() - started
            for terminal in terminals:
                terminal.tap = None  # nvitop prints its processes as it quits
            screens = {app.name: terminal.lines() for app, terminal in running}
        finally:
            for terminal in terminals:
                terminal.stop()
    if args.record:
        with open(args.record, "a", encoding="utf-8") as log:
            log.write(json.dumps(["window", started, started + seconds]) + "\n")
    for app in apps:
        pick = nvitop_region if app.name == "nvitop" else gputop_region
        report(app.name, maps[app.name], seconds, pick(screens[app.name]))
        if args.rows:
            report_rows(maps[app.name], seconds, screens[app.name], args.rows)
    return 0


def replay(path: Path, check: bool) -> int:
    """Feed the writes recorded in ``path`` (``--record``) through ``ScreenDiff``; print the
    bytes it sends over the recording's window, by kind. ``check``: after every write, the
    terminal fed the diff's output must show what the one fed Textual's shows."""
    lines = path.read_text(encoding="utf-8").splitlines()
    window = json.loads(lines[-1])
    if window[0] != "window":
        raise SystemExit(f"{path}: no window at its end (the recording did not finish)")
    _, start, end = window
    diff, byte_map = ScreenDiff(), ByteMap()
    before: Counter[tuple[str, int, int]] | None = None
    textual_bytes = 0
    screens: tuple[pyte.Screen, pyte.Screen] | None = None
    streams: list[pyte.Stream] = []
    for number, line in enumerate(lines[:-1]):
        at, size, diff.line_feeds, data = json.loads(line)
        if before is None and at >= start:
            before = byte_map.bytes.copy()
        if before is not None and at < end:
            textual_bytes += len(data.encode())
        out = diff.filter(data, tuple(size))
        if at < end:
            byte_map.feed(out.encode())
        if check:
            if screens is None or (screens[0].columns, screens[0].lines) != tuple(size):
                screens = (pyte.Screen(*size), pyte.Screen(*size))
                streams = [pyte.Stream(screen) for screen in screens]
            streams[0].feed(data)
            streams[1].feed(out)
            if _cells(screens[0]) != _cells(screens[1]):
                raise SystemExit(f"write {number}: the diff's terminal shows other cells")
    seconds = end - start
    byte_map.bytes.subtract(before or Counter())
    by_kind: Counter[str] = Counter()
    for (kind, _, _), count in byte_map.bytes.items():
        by_kind[kind] += count
    total = sum(by_kind.values())
    print(f"replay of {path}: {total / seconds:.0f} B/s over {seconds:.0f} s", end="")
    print(f" (Textual gave {textual_bytes / seconds:.0f} B/s)")
    kinds = ", ".join(f"{k} {v / seconds:.0f}" for k, v in by_kind.most_common())
    print(f"  by kind (B/s): {kinds}")
    if check:
        print("  every write's screen the same as Textual's")
    return 0


def _cells(screen: pyte.Screen) -> list[list[object]]:
    return [[screen.buffer[y][x] for x in range(screen.columns)] for y in range(screen.lines)]


def _tap(terminal: PtyTerminal, byte_map: ByteMap) -> None:
    """Give ``byte_map`` what ``terminal`` reads from now on, from where its cursor is."""
    byte_map.y, byte_map.x = terminal.screen.cursor.y, terminal.screen.cursor.x
    terminal.tap = byte_map.feed


if __name__ == "__main__":
    raise SystemExit(main())
