"""Send the terminal only the cells that changed, as curses does.

Textual repaints a dirty line of a widget from the widget's left edge, and writes each
segment as a complete colour sequence followed by a reset. On a busy machine every card and
most process rows change every second: about 15 KB/s from Textual as it is on the bench's
server (dgx-h100, 200 live processes), which is felt over SSH; under 1 KB/s with the diff
(docs/speed.md). ``ScreenDiff`` remembers what the terminal shows and rewrites each frame
into the cells that differ, with a colour sequence only where the colour changes, the
shortest cursor moves, and a row that moved by one cell (a sparkline) shifted by the
terminal; ``DiffingLinuxDriver`` (``diff_driver.py``) puts it between Textual and the
terminal.

Anything it does not follow is passed through unchanged and makes it forget what the
terminal shows, so at worst the terminal gets exactly what Textual wrote; so does a resize.
A full repaint is diffed like any other frame (Textual repaints everything twice as it
starts: the second would be 30 KB of cells already there); ``ctrl+l`` first makes the diff
forget (``diff_driver.forget_screens``), so its repaint reaches every cell and puts right a terminal
that something else wrote on.

See docs/screen-diff.md.
"""

from __future__ import annotations

import re

from rich.cells import cell_len, get_character_cell_size

from gputop.tui.screen_moves import move, tour
from gputop.tui.screen_pens import (
    RESET,
    RESET_PEN,
    Pen,
    change_pen,
    pen_of,
    pen_order,
)

Run = tuple[int, int, str, str]
"""Text a frame writes: row, column, the characters, and the SGR sequences before them."""
_Row = tuple[list[str | None], list[str | None]]
"""A row of what the terminal shows, its characters and their colours."""

HOME = "\x1b[1;1H"
"""The move that ends a frame when no widget wants the (hidden) cursor anywhere: Textual's
``App.cursor_position`` is then the top-left cell. Not sent (docs/screen-diff.md)."""

RESET_NEWLINE_MODE = "\x1b[20l"
"""LNM off: a line feed does not also return the carriage (VT100; the terminal's default)."""
REDRAW_RESET = "\x1b[r" + RESET_NEWLINE_MODE + RESET
"""Before ``ctrl+l``'s repaint: DECSTBM without rows (every row scrolls together, and the
cursor goes home), LNM off and the pen reset."""

DIFFED = "diffed"
"""A frame rewritten into the cells that changed."""
WHOLE = "whole"
"""A frame that changed every cell (the first, after ctrl+l or a resize): sent as it is."""
NOT_FOLLOWED = "not followed"
"""Output the diff does not follow (a sequence it does not know, a frame it cannot place):
sent as it is, and what the terminal shows is forgotten. Outside start-up, a resize and
``ctrl+l`` this means Textual writes something new (tests/tui/test_screen_diff_pty.py)."""
UNCHANGED = "unchanged"
"""Modes, queries, titles, cursor moves: sent as they are, nothing to diff."""
SHIFT_MIN_CELLS = 4
"""Changed cells a row's one-cell shift must account for before it is sent as a shift (two
moves, DCH and ICH: about 16 bytes, against at least 3 a cell and its moves)."""
MERGE_GAP = 4
"""At most this many unchanged cells between two changes are resent instead of moved over,
where that is fewer bytes than the move."""

_BARE_LINE_FEED = re.compile(r"(?<!\r)\n")
_SEQUENCE = re.compile(r"(\x1b\[[0-9;]*[Hfm]|\r\n|\r|\n)")
"""What a frame writes between its texts: cursor positions, colours, line ends."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HARMLESS = re.compile(
    r"(?:\x1b\[\?(?!(?:47|1047|1049)[hl])[0-9;]*[hl]"  # modes: mouse, paste, cursor
    r"|\x1b\[\?[0-9;]*\$p"  # mode queries
    r"|\x1b\[[<>=]?[0-9;]*u"  # keyboard protocol
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\))*\Z"  # titles, colour hints
)


class ScreenDiff:
    """What the terminal shows, cell by cell, and the rewriting of frames against it.

    A frame is what Textual writes for one screen update: cursor moves, SGR sequences and
    text. Each cell is kept as its character (``""`` for the right half of a wide one) and
    the SGR sequences it was written in; ``None`` is unknown, and an unknown cell is always
    sent.

    Half of a wide character overwritten leaves its other half stale here (the terminal
    blanks it), but a right half is only ever written with its left, so a stale half never
    matches what a later frame writes, and is sent again.
    """

    def __init__(self) -> None:
        self._size = (0, 0)
        self._chars: list[list[str | None]] = []
        self._sgrs: list[list[str | None]] = []
        self._cursor: str | None = None
        self._parked: tuple[int, int] | None = None
        """Where the last frame left the cursor, when it was not sent home (row, column;
        ``HOME``): the next frame's first move starts from there. Only the next call of
        ``filter`` may use it."""
        self._pen: Pen | None = RESET_PEN
        """The terminal's pen after the last frame (None: not known). A frame ends in the
        pen of its last colour and the next starts from it (docs/screen-diff.md)."""
        self.last_outcome = UNCHANGED
        """What ``filter`` did with the last output it was given (``DIFFED``, ...)."""
        self.line_feeds = False
        """The terminal gets a line feed as it is (no ``ONLCR``): one byte moves the cursor
        down a row in its column, as curses does. Output passed through then has each bare
        line feed sent as carriage return and line feed, which it means."""
        self._reset_first = ""
        """What ``redraw`` left to send before the next output."""

    def forget(self, size: tuple[int, int] | None = None) -> None:
        """Every cell unknown, e.g. after the terminal was resized or cleared."""
        if size is not None:
            self._size = size
        columns, rows = self._size
        self._chars = [[None] * columns for _ in range(rows)]
        self._sgrs = [[None] * columns for _ in range(rows)]
        self._cursor = None
        self._parked = None

    def redraw(self) -> None:
        """Forget what the terminal shows (``ctrl+l``: something else may have written on
        it), and send before the next output (the repaint) the whole screen as the
        scrolling region (DECSTBM), newline mode off (LNM) and the pen reset, which another
        program may have left set: the diff's line feed at the region's bottom row or
        reverse index at its top would scroll part of the screen, a line feed return the
        carriage too, and an underline or reverse left on would mark the repaint's first
        cells, which the diff does not send again."""
        self.forget()
        self._pen = RESET_PEN
        self._reset_first = REDRAW_RESET

    def filter(self, data: str, size: tuple[int, int] | None) -> str:
        """What to write instead of ``data`` for a terminal of ``size`` (columns, rows)."""
        out = self._passed_on(data, size)
        if self._reset_first:
            out, self._reset_first = self._reset_first + out, ""
        return out

    def release_pen(self) -> str:
        """What resets the terminal's pen, if a frame left it set (before the application
        leaves the terminal to others); the pen is then reset."""
        kept, self._pen = self._pen, RESET_PEN
        return "" if kept == RESET_PEN else RESET

    def _passed_on(self, data: str, size: tuple[int, int] | None) -> str:
        out = self._filter(data, size)
        if out is not data or self.last_outcome == UNCHANGED:
            return out
        # Passed through as it is: it starts from a reset pen, as Textual's output assumes.
        # Textual's frame leaves the pen reset (each segment ends with a reset); anything
        # else leaves one not known.
        if self.line_feeds and "\n" in data:
            out = _BARE_LINE_FEED.sub("\r\n", data)
        if self._pen != RESET_PEN:
            out = RESET + out
        self._pen = RESET_PEN if self.last_outcome == WHOLE else None
        return out

    def _filter(self, data: str, size: tuple[int, int] | None) -> str:
        parked, self._parked = self._parked, None  # any output but a frame may move it
        if size is None:
            self.forget((0, 0))
            self.last_outcome = NOT_FOLLOWED
            return data
        if size != self._size:  # the terminal may have moved the cursor, too
            self.forget(size)
            parked = None
        parsed = _parse(data)
        if parsed is None:  # not a frame: modes, queries, titles are harmless
            if _HARMLESS.match(data):
                self.last_outcome = UNCHANGED
            else:
                self.forget()
                self.last_outcome = NOT_FOLLOWED
            return data
        runs, cursor = parsed
        if not runs:  # only moves the cursor
            self._cursor = cursor or self._cursor
            self.last_outcome = UNCHANGED
            return data
        columns, rows = self._size
        before: dict[int, _Row] = {}
        changed = self._apply(runs, before)
        if changed is None:
            self.forget()
            self.last_outcome = NOT_FOLLOWED
            return data
        if len(changed) == rows and sum(map(len, changed.values())) >= columns * rows:
            self._cursor = cursor  # every cell new (the first frame, after ctrl+l): as it is
            self.last_outcome = WHOLE
            return data
        self.last_outcome = DIFFED
        update, at = self._update(changed, self._shifts(changed, before), parked)
        if cursor == HOME:
            # Where Textual puts the cursor when no widget wants it: hidden, so left where
            # the update left it, and the next frame moves on from there.
            self._cursor, self._parked = None, at
        elif cursor is not None and (update or cursor != self._cursor):
            update.append(cursor)
            self._cursor = cursor
        elif update:  # the cursor is no longer where the last move sent put it
            self._cursor = None
        return "".join(update)

    # -- internals -----------------------------------------------------------------------

    def _apply(self, runs: list[Run], before: dict[int, _Row]) -> dict[int, set[int]] | None:
        """Write the runs into what the terminal shows; the cells that changed, by row.
        ``before``: each row it writes into, as it was (copied at its first write, not
        the whole screen every frame: most rows of a busy frame are as they were).

        ``None`` when a run does not fit the screen or is not followed.
        """
        columns, rows = self._size
        changed: dict[int, set[int]] = {}
        wide_rows: set[int] = set()  # written with text not ASCII: wide characters only there
        for y, x, text, sgr in runs:
            if not 0 <= y < rows or x < 0:
                return None
            chars, sgrs = self._chars[y], self._sgrs[y]
            end = x + len(text)
            ascii_text = text.isascii()
            if not ascii_text:
                wide_rows.add(y)
            if ascii_text or cell_len(text) == len(text):  # one cell a character
                if end > columns:
                    return None
                new_chars, new_sgrs = list(text), [sgr] * len(text)
                old_chars, old_sgrs = chars[x:end], sgrs[x:end]
                if old_chars == new_chars and old_sgrs == new_sgrs:
                    continue  # most text Textual writes is already there
                if y not in before:
                    before[y] = chars[:], sgrs[:]
                changed.setdefault(y, set()).update(
                    i
                    for i, old_char, new_char, old_sgr in zip(
                        range(x, end), old_chars, text, old_sgrs, strict=True
                    )
                    if old_char != new_char or old_sgr != sgr
                )
                chars[x:end], sgrs[x:end] = new_chars, new_sgrs
                continue
            if y not in before:
                before[y] = chars[:], sgrs[:]
            if not self._apply_wide(y, x, text, sgr, changed.setdefault(y, set())):
                return None
        for y in wide_rows.intersection(changed):
            chars, row_changed = self._chars[y], changed[y]
            for i in list(row_changed):
                # A wide character is sent whole, by its left half. A frame that leaves
                # half of one on its own is not followed.
                char = chars[i]
                if char and char.isascii():
                    continue
                if char == "":
                    if i == 0 or not _wide(chars[i - 1]):
                        return None
                    row_changed.add(i - 1)
                elif _wide(chars[i]) and (i + 1 >= columns or chars[i + 1] != ""):
                    return None
        return changed

    def _apply_wide(self, y: int, x: int, text: str, sgr: str, row_changed: set[int]) -> bool:
        columns = self._size[0]
        chars, sgrs = self._chars[y], self._sgrs[y]
        for char in text:
            width = get_character_cell_size(char)
            if width == 0:  # combining: joins the cell before
                before = chars[x - 1] if x > 0 else None
                if not before:
                    return False
                chars[x - 1] = before + char
                row_changed.add(x - 1)
                continue
            if x + width > columns:
                return False
            for i, cell_char in enumerate((char, "")[:width], x):
                if chars[i] != cell_char or sgrs[i] != sgr:
                    chars[i], sgrs[i] = cell_char, sgr
                    row_changed.add(i)
            x += width
        return True

    def _shifts(
        self, changed: dict[int, set[int]], before: dict[int, _Row]
    ) -> list[tuple[int, int, int]]:
        """Runs of a row that moved one cell left (a sparkline scrolling), as (row, first,
        last column): the terminal shifts them itself, by deleting a character at the first
        column and inserting one at the last (DCH, ICH; as curses does with ``idcok``), and
        only the last cell is written, straight after the insert, where the cursor already
        is (``_update``). Those cells leave ``changed``, the last one joins it.

        Only rows of known, narrow characters: the shift must not cut a wide one.
        """
        shifts: list[tuple[int, int, int]] = []
        columns = self._size[0]
        for y, row_changed in changed.items():
            if len(row_changed) < SHIFT_MIN_CELLS:
                continue
            chars, sgrs = self._chars[y], self._sgrs[y]
            old_chars, old_sgrs = before[y]
            # A run saves at most the changed cells that equal their right neighbour of
            # before: a row with too few of those has none to shift (most rows).
            hits = sum(
                1
                for i in row_changed
                if i < columns - 1 and chars[i] == old_chars[i + 1] and sgrs[i] == old_sgrs[i + 1]
            )
            if hits < SHIFT_MIN_CELLS:
                continue
            # A run saves only the changed cells in it: none starts before the first changed
            # cell or after the last (unchanged cells before it equal their right neighbour,
            # so leaving them unshifted shows the same).
            x, last = min(row_changed), max(row_changed)
            while x < columns - 1 and x <= last:
                end = x
                while (
                    end < columns - 1
                    and chars[end] == old_chars[end + 1]
                    and sgrs[end] == old_sgrs[end + 1]
                ):
                    end += 1
                saved = sum(1 for i in range(x, end) if i in row_changed)
                if saved >= SHIFT_MIN_CELLS:
                    # the terminal shifts everything right of x: all of it one cell wide
                    if not _all_narrow(chars[x:]) or not _all_narrow(old_chars[x:]):
                        break
                    shifts.append((y, x, end))
                    row_changed.difference_update(range(x, end))
                    row_changed.add(end)
                x = end + 1
        return shifts

    def _update(
        self,
        changed: dict[int, set[int]],
        shifts: list[tuple[int, int, int]],
        cursor: tuple[int, int] | None = None,
    ) -> tuple[list[str], tuple[int, int]]:
        """The changed cells grouped by colour, each colour change sent as what changes, a
        shifted run just before its last cell (docs/screen-diff.md, "What an update is made
        of").

        Cells are independent once the cursor is on them, so all the cells of one colour are
        sent together, whatever their rows: a busy frame changes a handful of colours but
        switches between them dozens of times in screen order. The colours go in the order
        that changes the pen with the fewest bytes. Within a colour, a short gap of
        unchanged cells of the same colour is resent where that is fewer bytes than moving
        over it, the runs of cells go in an order of few cursor bytes (``tour``: a table's
        column down, then the next), and each move is the shortest one. The pen is left as
        the last colour set it, and the next frame starts from there: a busy frame often
        starts with the colour the last one ended in (a column of the process table).

        ``cursor``: where the terminal's cursor is (row, column), if known. Returns the
        update and where it leaves the cursor.
        """
        groups: dict[str, list[tuple[int, int]]] = {}
        for y in sorted(changed):
            chars, sgrs = self._chars[y], self._sgrs[y]
            for x in sorted(changed[y]):
                if chars[x]:  # the right half of a wide character is sent with its left
                    groups.setdefault(sgrs[x] or "", []).append((y, x))
        columns = self._size[0]
        out: list[str] = []
        pen = self._pen
        row, column = cursor or (-1, -1)  # where the terminal's cursor is
        shift_ending_at = {(y, last): first for y, first, last in shifts}
        feeds = self.line_feeds
        for sgr in pen_order(groups, pen):
            cells = groups[sgr]
            target = pen_of(sgr)
            if target != pen:
                out.append(change_pen(pen, target, sgr))
                pen = target
            runs, ends = self._runs(cells, sgr, shift_ending_at)
            for run in tour(runs, (row, column), columns, feeds):
                y, x = cells[ends[run - 1] if run else 0]
                # A resent gap never reaches into a run still to shift: it would hold the
                # whole run and its last cell (no cursor is left inside one), more than
                # MERGE_GAP cells.
                first = shift_ending_at.get((y, x)) if shift_ending_at else None
                if first is not None:  # the run shifts, then its new cell is written here
                    out.append(move(y, first, row, column, columns, feeds) + "\x1b[P")
                    out.append(move(y, x, y, first, columns, feeds) + "\x1b[@")
                elif y != row or x != column:
                    step = move(y, x, row, column, columns, feeds)
                    gap = self._resendable(y, column, x, sgr) if y == row else None
                    out.append(step if gap is None or _bytes(gap) > _bytes(step) else gap)
                # The rest of the run is its cells and the gaps between them that _runs
                # found cheaper to resend than to move over: every cell up to where it
                # leaves the cursor, in one piece (a wide character's right half is "").
                leave = runs[run][2]
                out.append("".join(self._chars[y][x:leave]))  # type: ignore[arg-type]
                row, column = y, leave
        self._pen = pen
        return out, (row, column)

    def _runs(
        self, cells: list[tuple[int, int]], sgr: str, shift_ending_at: dict[tuple[int, int], int]
    ) -> tuple[list[tuple[int, int, int]], list[int]]:
        """The cells of one colour (in screen order) as runs the cursor goes through without
        a move: each run's row, the column the cursor enters it at and the one it leaves it
        at (for ``tour``), and where in ``cells`` each ends. Cells next to each other, or with
        a gap between that is resent (``_resendable``), are one run; a shifted run's last
        cell starts one, entered where the shift starts.
        """
        columns, feeds = self._size[0], self.line_feeds
        runs: list[tuple[int, int, int]] = []
        ends: list[int] = []
        for index, (y, x) in enumerate(cells):
            char = self._chars[y][x] or ""
            leave = x + (1 if char.isascii() else cell_len(char))
            first = shift_ending_at.get((y, x))
            if first is None and runs and runs[-1][0] == y:
                _, entry, column = runs[-1]
                gap = "" if column == x else self._resendable(y, column, x, sgr)
                if gap == "" or (
                    gap is not None and _bytes(gap) <= len(move(y, x, y, column, columns, feeds))
                ):
                    runs[-1], ends[-1] = (y, entry, leave), index + 1
                    continue
            runs.append((y, x if first is None else first, leave))
            ends.append(index + 1)
        return runs, ends

    def _resendable(self, y: int, column: int, x: int, sgr: str) -> str | None:
        """The cells from ``column`` up to ``x`` on row ``y``, to resend instead of moving
        over them, where they are known, narrow and in the pen ``sgr``; else None."""
        if not 0 <= column < x or x - column > MERGE_GAP:
            return None
        chars, sgrs = self._chars[y], self._sgrs[y]
        if all(_narrow(chars[g]) and (sgrs[g] or "") == sgr for g in range(column, x)):
            return "".join(chars[g] or "" for g in range(column, x))
        return None


def _bytes(text: str) -> int:
    """What ``text`` costs on the wire (UTF-8)."""
    return len(text) if text.isascii() else len(text.encode())


def _wide(char: str | None) -> bool:
    return char is not None and not char.isascii() and cell_len(char) == 2


def _narrow(char: str | None) -> bool:
    return char is not None and char != "" and (char.isascii() or cell_len(char) == 1)


def _all_narrow(chars: list[str | None]) -> bool:
    """``all(map(_narrow, chars))``, each different character measured once (a sparkline's
    row to its end is some 150 cells of a dozen characters)."""
    if None in chars or "" in chars:
        return False
    return all(char.isascii() or cell_len(char) == 1 for char in set(chars) if char is not None)


def _parse(data: str) -> tuple[list[Run], str | None] | None:
    """The text a frame writes, and its last cursor move.

    ``None`` when ``data`` is not only cursor moves, colours and text.
    """
    # Split on the sequences a frame is made of: text sits at the even places, a sequence
    # between each two. Text holding any other control character is not followed.
    parts = _SEQUENCE.split(data)
    if _CONTROL.search("".join(parts[0::2])):
        return None
    runs: list[Run] = []
    x = y = 0
    sgr = ""
    cursor: str | None = None
    text = parts[0]
    if text:
        runs.append((0, 0, text, ""))
        x = len(text) if text.isascii() else cell_len(text)
    for i in range(1, len(parts), 2):
        sequence = parts[i]
        final = sequence[-1]
        if final == "m":
            sgr = "" if sequence in ("\x1b[m", "\x1b[0m") else sgr + sequence
        elif final in "Hf":  # 1-based row;column
            params = sequence[2:-1].split(";")
            y = int(params[0] or 1) - 1
            x = int(params[1] or 1) - 1 if len(params) > 1 else 0
            cursor = sequence
        else:  # Textual positions every line itself; a newline only ends one.
            if sequence != "\r":
                y += 1
            x = 0
        text = parts[i + 1]
        if text:
            runs.append((y, x, text, sgr))
            x += len(text) if text.isascii() else cell_len(text)
            cursor = None
    return runs, cursor
