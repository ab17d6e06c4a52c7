"""The cursor's moves for the screen diff: the shortest sequence from one cell to another,
what it costs without writing it, and the order of a colour's runs of cells that moves the
cursor with few bytes (docs/screen-diff.md, "What an update is made of").

Every sequence here is in the terminfo entries of xterm, the Linux console, screen and tmux
(``cup``, ``cuu``/``cud``/``cuf``/``cub``, ``hpa``, ``cr``, ``cub1`` (backspace), ``cud1``
(line feed) and ``ri``, which screen's and tmux's entries give as their ``cuu1``), and pyte,
which the tests use, follows them all. A line feed and a reverse index scroll the screen
only at its bottom and top rows, which a move down or up to a cell of the screen never
leaves from (Textual sets no scrolling region).
"""

from __future__ import annotations

FEEDS_MAX = 3
"""At most this many line feeds for a move down; more are no shorter than CUD."""
BACKSPACES_MAX = 3
"""At most this many backspaces for a move left; more are no shorter than CUB."""
SHORTEST_CUP = 4
"""The shortest absolute move: ``CSI 1 H``, the first row's first column."""
LINK_MAX = 4
"""The dearest move (bytes) that ``tour`` chains two runs by before joining the chains:
longer links, taken cheapest first, chain runs that are better reached from elsewhere."""
LINK_ROWS = range(-1, FEEDS_MAX + 1)
"""The rows, relative to a run's, where the next run can be at most ``LINK_MAX`` bytes away
(up: a reverse index and two backspaces; down: line feeds)."""


def move(y: int, x: int, row: int, column: int, columns: int, feeds: bool = False) -> str:
    """The shortest sequence that puts the cursor at row ``y``, column ``x`` (0-based) from
    row ``row``, column ``column`` (``row`` -1: unknown).

    Absolute (CUP) or relative: up or down (CUU/CUD, a reverse index for one row up, line
    feeds where ``feeds``), then along the row (CUF/CUB, the column itself (CHA), a carriage
    return, backspaces), as curses chooses. A relative move needs a known cursor inside the
    screen: after a write to the last column the terminal's cursor waits to wrap, and where
    it then is differs between terminals. ``feeds``: a line feed moves down a row and no
    more (``ScreenDiff.line_feeds``). ``move_cost`` is its length.
    """
    best = f"\x1b[{y + 1}H" if x == 0 else f"\x1b[{y + 1};{x + 1}H"
    if row < 0 or not 0 <= column < columns:
        return best
    down = y - row
    if not down:
        vertical = ""
    elif feeds and 0 < down <= FEEDS_MAX:
        vertical = "\n" * down
    elif down == -1:
        vertical = "\x1bM"  # reverse index: two bytes
    else:
        vertical = _step(abs(down), "B" if down > 0 else "A")
    if x == column:
        horizontal = ""
    elif x == 0:
        horizontal = "\r"
    elif column - BACKSPACES_MAX <= x < column:
        horizontal = "\b" * (column - x)  # backspaces: one byte a cell
    else:
        horizontal = _step(abs(x - column), "C" if x > column else "D")
        if len(horizontal) > 3 + _digits(x + 1):
            horizontal = f"\x1b[{x + 1}G"
    relative = vertical + horizontal
    return relative if len(relative) < len(best) else best


def move_cost(y: int, x: int, row: int, column: int, columns: int, feeds: bool = False) -> int:
    """The length of ``move(...)``, worked out without writing it (``tour`` asks for many;
    the digits counted in place, as ``_digits`` counts them)."""
    cha = 3 + (1 if x < 9 else 2 if x < 99 else len(str(x + 1)))  # the column itself (CHA)
    if row >= 0 and 0 <= column < columns:
        relative = _vertical(y - row, feeds) + _horizontal(x - column, x, cha)
        if relative <= SHORTEST_CUP:
            return relative
    else:
        relative = columns + 99  # only absolute
    line = 1 if y < 9 else 2 if y < 99 else len(str(y + 1))
    absolute = (3 + line) if x == 0 else (cha + 1 + line)
    return relative if relative < absolute else absolute


def _vertical(down: int, feeds: bool) -> int:
    """The bytes of ``move``'s part up or down by ``down`` rows."""
    if not down:
        return 0
    if feeds and 0 < down <= FEEDS_MAX:
        return down
    if down == -1:
        return 2
    rows = -down if down < 0 else down
    return 3 if rows == 1 else 4 if rows < 10 else 5 if rows < 100 else 3 + len(str(rows))


def _horizontal(right: int, x: int, cha: int) -> int:
    """The bytes of ``move``'s part along the row, ``right`` cells to column ``x`` (``cha``:
    the bytes of naming that column)."""
    if not right:
        return 0
    if x == 0:
        return 1
    if -BACKSPACES_MAX <= right < 0:
        return -right
    cells = -right if right < 0 else right
    step = 3 if cells == 1 else 4 if cells < 10 else 5 if cells < 100 else 3 + len(str(cells))
    return step if step < cha else cha


def tour(
    runs: list[tuple[int, int, int]], cursor: tuple[int, int], columns: int, feeds: bool
) -> list[int]:
    """An order of ``runs`` (row, the column the cursor enters at, the column it leaves at),
    by index, whose moves are few bytes, from the cursor at ``cursor`` (row, column; -1, -1
    not known).

    Greedy edges, the cheapest first: a run is chained to the next where the move between
    them is at most ``LINK_MAX`` bytes and neither end is taken already (nor would the link
    close a loop); then the chains go one after another, each time the one whose first run
    is nearest. In screen order, a table's rows would be swept one after another, a long
    move back each time; chained, a column of one colour goes down a row at a time (a line
    feed and a backspace or two), and the next column after it. Screen order is kept where
    it is no dearer.
    """
    count = len(runs)
    if count < 2:
        return list(range(count))
    entries: dict[int, list[tuple[int, int]]] = {}
    for index, (y, entry, _) in enumerate(runs):
        entries.setdefault(y, []).append((entry, index))
    links: list[tuple[int, int, int]] = []
    verticals = [(down, _vertical(down, feeds)) for down in LINK_ROWS]
    for a, (y, _, leave) in enumerate(runs):
        known = 0 <= leave < columns
        for down, vertical in verticals:
            below = entries.get(y + down)
            if below is None:
                continue
            # at most LINK_MAX bytes: on the row, a one-digit step or column (CHA); on
            # another, the row's move leaves at most three for a backspace or a step right
            low, high = (leave - 9, leave + 10) if not down else (leave - 3, leave + 2)
            home = y + down < 9  # its first column's absolute move is LINK_MAX bytes
            for entry, b in below:
                if low <= entry < high or entry < (9 if not down else 1):
                    cost = _link_cost(vertical, entry, leave) if known else LINK_MAX + 1
                    if cost > LINK_MAX and not entry and home:
                        cost = LINK_MAX
                    if cost <= LINK_MAX and b != a:
                        links.append((cost, a, b))
    links.sort()
    following = [-1] * count
    followed = [False] * count
    spent = 0  # the bytes of the moves of the order
    head_of = list(range(count))  # of a chain's last run: its first
    last_of = list(range(count))  # of a chain's first run: its last
    for cost, a, b in links:
        if following[a] < 0 and not followed[b] and head_of[a] != b:
            following[a], followed[b] = b, True
            spent += cost
            head, last = head_of[a], last_of[b]
            last_of[head], head_of[last] = last, head
    heads = [index for index in range(count) if not followed[index]]
    order: list[int] = []
    row, column = cursor
    reach = _reach(runs)
    while heads:
        nearest, cheapest = _nearest(heads, reach, row, column, columns, feeds)
        heads.remove(nearest)
        spent += cheapest
        index = nearest
        while index >= 0:
            order.append(index)
            index = following[index]
        row, column = runs[order[-1]][0], runs[order[-1]][2]
    row, column = cursor
    for y, entry, leave in runs:  # screen order, while it is not dearer
        spent -= move_cost(y, entry, row, column, columns, feeds)
        if spent < 0:
            return order
        row, column = y, leave
    return list(range(count))


def _link_cost(vertical: int, entry: int, leave: int) -> int:
    """``move_cost`` of a link (``tour``) from a known cursor at ``leave`` to ``entry``,
    ``vertical`` bytes up or down, where it is at most ``LINK_MAX`` (= ``SHORTEST_CUP``:
    then the relative move, which the absolute one can only equal at a first column of the
    first nine rows, the caller's case); some larger figure otherwise."""
    right = entry - leave
    if not right:
        return vertical
    if not entry:
        return vertical + 1
    if -BACKSPACES_MAX <= right < 0:
        return vertical - right
    cells = -right if right < 0 else right
    # a step of one cell is three bytes, of 2-9 four (the column itself: four from the
    # second column up to the ninth, so never fewer); more is past LINK_MAX whatever it is
    return vertical + (3 if cells == 1 else 4 if cells < 10 or entry < 9 else 5)


def _reach(runs: list[tuple[int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Of each run, what a move to it costs whatever the cursor: its row and entry, the
    entry's absolute column (CHA) and the absolute move (CUP), counted as ``move_cost``."""
    reach = []
    for y, x, _ in runs:
        cha = 3 + (1 if x < 9 else 2 if x < 99 else len(str(x + 1)))
        line = 1 if y < 9 else 2 if y < 99 else len(str(y + 1))
        reach.append((y, x, cha, (3 + line) if x == 0 else (cha + 1 + line)))
    return reach


def _nearest(
    heads: list[int],
    reach: list[tuple[int, int, int, int]],
    row: int,
    column: int,
    columns: int,
    feeds: bool,
) -> tuple[int, int]:
    """The first of ``heads`` whose run (``_reach``) the cursor reaches in the fewest bytes
    from ``row``, ``column``, and that move's cost, as ``move_cost`` counts it (a busy frame
    asks this of some 1,600 heads): each head's absolute move counted once a tour, a head
    passed over once that and its move up or down cost no less than the cheapest found (it
    is then no cheaper), and a stop at a cost of nothing."""
    nearest, cheapest = -1, 0
    known = row >= 0 and 0 <= column < columns
    for head in heads:
        y, x, cha, cost = reach[head]  # cost: the absolute move's, so far
        if known:
            vertical = _vertical(y - row, feeds)
            if nearest >= 0 and vertical >= cheapest and cost >= cheapest:
                continue  # no cheaper than the cheapest found, whatever the move along
            relative = vertical + _horizontal(x - column, x, cha)
            if relative < cost:
                cost = relative
        elif columns + 99 < cost:  # as move_cost: no relative move, only absolute
            cost = columns + 99
        if nearest < 0 or cost < cheapest:
            nearest, cheapest = head, cost
            if not cost:  # none is cheaper, and the first of equals is taken
                break
    return nearest, cheapest


def _step(count: int, final: str) -> str:
    return f"\x1b[{final}" if count == 1 else f"\x1b[{count}{final}"


def _digits(number: int) -> int:
    return 1 if number < 10 else 2 if number < 100 else len(str(number))
