"""Send the terminal only the cells that changed, as curses does.

Textual repaints a dirty line of a widget from the widget's left edge, and writes each
segment as a complete colour sequence followed by a reset. On a busy machine every card and
most process rows change every second: about 40 KB/s, which is felt over SSH. ``ScreenDiff``
remembers what the terminal shows and rewrites each frame into the cells that differ, with a
colour sequence only where the colour changes; ``DiffingLinuxDriver`` puts it between
Textual and the terminal.

Anything it does not follow is passed through unchanged and makes it forget what the
terminal shows, so at worst the terminal gets exactly what Textual wrote.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from rich.cells import get_character_cell_size
from textual.drivers.linux_driver import LinuxDriver

Cell = tuple[str, str]
"""A character (``""`` for the right half of a wide one) and the SGR sequences before it."""

RESET = "\x1b[0m"
MERGE_GAP = 4
"""Unchanged cells between two changes that are cheaper to resend than a cursor move."""

_TOKEN = re.compile(
    r"\x1b\[(?P<params>[0-9;]*)(?P<final>[Hfm])"  # cursor position, colours
    r"|(?P<text>[^\x00-\x1f\x7f]+)"
    r"|(?P<newline>\r\n|\r|\n)"
)
_HARMLESS = re.compile(
    r"(?:\x1b\[\?(?!(?:47|1047|1049)[hl])[0-9;]*[hl]"  # modes: mouse, paste, cursor
    r"|\x1b\[\?[0-9;]*\$p"  # mode queries
    r"|\x1b\[[<>=]?[0-9;]*u"  # keyboard protocol
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\))*\Z"  # titles, colour hints
)


class ScreenDiff:
    """What the terminal shows, cell by cell, and the rewriting of frames against it.

    A frame is what Textual writes for one screen update: cursor moves, SGR sequences and
    text. Cells never written, or whose state became uncertain, are unknown and always sent.
    """

    def __init__(self) -> None:
        self._size = (0, 0)
        self._shown: list[list[Cell | None]] = []
        self._cursor: str | None = None

    def forget(self, size: tuple[int, int] | None = None) -> None:
        """Every cell unknown, e.g. after the terminal was resized or cleared."""
        if size is not None:
            self._size = size
        columns, rows = self._size
        self._shown = [[None] * columns for _ in range(rows)]
        self._cursor = None

    def filter(self, data: str, size: tuple[int, int] | None) -> str:
        """What to write instead of ``data`` for a terminal of ``size`` (columns, rows)."""
        if size is None:
            self.forget((0, 0))
            return data
        if size != self._size:
            self.forget(size)
        written, cursor = _cells_written(data)
        if written is None:  # not a frame: modes, queries, titles are harmless
            if not _HARMLESS.match(data):
                self.forget()
            return data
        if not written:  # only moves the cursor
            self._cursor = cursor or self._cursor
            return data
        if not self._fits(written):
            self.forget()
            return data
        columns, rows = self._size
        if sum(len(row) for row in written.values()) >= columns * rows:
            self._remember(written)  # a full repaint: nothing to gain
            self._cursor = cursor
            return data
        update = self._changes(written)
        self._remember(written)
        if cursor is not None and (update or cursor != self._cursor):
            update.append(cursor)
            self._cursor = cursor
        return "".join(update)

    # -- internals -----------------------------------------------------------------------

    def _fits(self, written: dict[int, dict[int, Cell]]) -> bool:
        columns, rows = self._size
        return all(
            0 <= y < rows and all(0 <= x < columns for x in row) for y, row in written.items()
        )

    def _changes(self, written: dict[int, dict[int, Cell]]) -> list[str]:
        """What to send: the changed cells, grouped in runs.

        The terminal's colours are reset between writes (Textual ends each segment with a
        reset, and so does this), so ``current`` starts empty.
        """
        out: list[str] = []
        current = ""
        for y in sorted(written):
            row, shown = written[y], self._shown[y]
            changed = {x for x, cell in row.items() if shown[x] != cell}
            # A wide character is sent whole: a change to either half sends its left half.
            # (Half of one overwritten leaves a stale half here, but a right half is only
            # ever written with its left, so a stale half never matches and is resent.)
            changed |= {x - 1 for x in changed if row[x][0] == "" and x - 1 in row}
            for run in _runs(sorted(changed), row):
                out.append(f"\x1b[{y + 1};{run[0] + 1}H")
                for x in run:
                    char, sgr = row[x]
                    if not char:
                        continue
                    if sgr != current:
                        out.append(_select(sgr))
                        current = sgr
                    out.append(char)
        if current:
            out.append(RESET)
        return out

    def _remember(self, written: dict[int, dict[int, Cell]]) -> None:
        for y, row in written.items():
            shown = self._shown[y]
            for x, cell in row.items():
                shown[x] = cell


def _runs(changed: list[int], row: dict[int, Cell]) -> list[list[int]]:
    """Changed columns in runs; a short gap of cells the frame also wrote is filled in."""
    runs: list[list[int]] = []
    for x in changed:
        if runs:
            last = runs[-1][-1]
            gap = range(last + 1, x)
            if len(gap) <= MERGE_GAP and all(g in row for g in gap):
                runs[-1].extend(gap)
                runs[-1].append(x)
                continue
        runs.append([x])
    return runs


def _select(sgr: str) -> str:
    """Reset and set ``sgr`` in one sequence where it is a single one."""
    if not sgr:
        return RESET
    if sgr.count("\x1b[") == 1:
        return "\x1b[0;" + sgr[2:]
    return RESET + sgr


def _cells_written(data: str) -> tuple[dict[int, dict[int, Cell]] | None, str | None]:
    """The cells a frame writes, by row then column, and its last cursor move.

    ``None`` when ``data`` is not only cursor moves, colours and text, or does something
    with them that this module does not follow.
    """
    written: dict[int, dict[int, Cell]] = {}
    x = y = 0
    sgr = ""
    cursor: str | None = None
    position = 0
    for match in _TOKEN.finditer(data):
        if match.start() != position:
            return None, None
        position = match.end()
        text = match.group("text")
        if text is not None:
            # Textual may write a cell twice in one frame, always the same way; a cell
            # written two ways is not followed.
            row = written.setdefault(y, {})
            if text.isascii():
                for char in text:
                    cell = (char, sgr)
                    if row.setdefault(x, cell) != cell:
                        return None, None
                    x += 1
            else:
                for char in text:
                    width = get_character_cell_size(char)
                    if width == 0:  # combining: joins the cell before
                        if x - 1 not in row or not row[x - 1][0]:
                            return None, None
                        row[x - 1] = (row[x - 1][0] + char, row[x - 1][1])
                        continue
                    cells = [(char, sgr), ("", sgr)][:width]
                    for offset, cell in enumerate(cells):
                        if row.setdefault(x + offset, cell) != cell:
                            return None, None
                    x += width
            cursor = None
            continue
        final = match.group("final")
        if final == "m":
            params = match.group("params")
            sgr = "" if params in ("", "0") else sgr + match.group(0)
        elif final is not None:  # H, f: 1-based row;column
            params = match.group("params").split(";")
            y = int(params[0] or 1) - 1
            x = int(params[1] or 1) - 1 if len(params) > 1 else 0
            cursor = match.group(0)
        elif match.group("newline") is not None:
            # Textual positions every line itself; a newline only ends one.
            if match.group("newline") != "\r":
                y += 1
            x = 0
    if position != len(data):
        return None, None
    return written, cursor


class DiffingLinuxDriver(LinuxDriver):
    """Textual's terminal driver, writing only what changed on the screen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._screen_diff = ScreenDiff()
        self._screen_diff_lock = threading.Lock()

    def write(self, data: str) -> None:
        with self._screen_diff_lock:
            data = self._screen_diff.filter(data, self._terminal_size())
        if data:
            super().write(data)

    def _terminal_size(self) -> tuple[int, int] | None:
        try:
            size = os.get_terminal_size(self.fileno)
        except OSError:
            return None
        return size.columns, size.lines


def diffing_driver(driver_class: type[Any]) -> type[Any]:
    """The driver to use instead of ``driver_class``: the diffing one for Textual's own."""
    return DiffingLinuxDriver if driver_class is LinuxDriver else driver_class
