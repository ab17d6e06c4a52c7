"""The terminal's pen for the screen diff: what a run of SGR sequences leaves, the shortest
sequence from one pen to another, and the order of a frame's colours that changes the pen
with the fewest bytes (docs/screen-diff.md, "What an update is made of")."""

from __future__ import annotations

import re

RESET = "\x1b[0m"

Pen = tuple[frozenset[int], str, str]
"""A terminal's pen: its flags (1 bold, 2 dim, 3 italic, ...), foreground and background
(each as its SGR parameters, ``""`` for the default)."""

RESET_PEN: Pen = (frozenset(), "", "")
_FLAG_OFF = {1: 22, 2: 22, 3: 23, 4: 24, 5: 25, 7: 27, 8: 28, 9: 29}
_known_pens: dict[str, Pen | None] = {}


def pen_of(sgr: str) -> Pen | None:
    """The pen ``sgr`` (a run of SGR sequences) leaves, from a reset; None if not followed."""
    known = _known_pens.get(sgr, RESET_PEN)
    if known is not RESET_PEN or sgr in _known_pens:
        return known
    flags: set[int] = set()
    foreground = background = ""
    pen: Pen | None = None
    try:
        for sequence in re.findall(r"\x1b\[([0-9;]*)m", sgr):
            params = [int(p) if p else 0 for p in sequence.split(";")]
            i = 0
            while i < len(params):
                code = params[i]
                if code == 0:
                    flags, foreground, background = set(), "", ""
                elif code in _FLAG_OFF:
                    flags.add(code)
                elif code in (38, 48):
                    width = 5 if params[i + 1] == 2 else 3 if params[i + 1] == 5 else 0
                    if not width or i + width > len(params):
                        raise ValueError(sequence)
                    colour = ";".join(str(p) for p in params[i : i + width])
                    if code == 38:
                        foreground = colour
                    else:
                        background = colour
                    i += width - 1
                elif 30 <= code <= 37 or 90 <= code <= 97:
                    foreground = str(code)
                elif 40 <= code <= 47 or 100 <= code <= 107:
                    background = str(code)
                elif code == 39:
                    foreground = ""
                elif code == 49:
                    background = ""
                else:
                    raise ValueError(sequence)
                i += 1
        pen = (frozenset(flags), foreground, background)
    except (ValueError, IndexError):
        pen = None
    if len(_known_pens) < 4096:
        _known_pens[sgr] = pen
    return pen


def change_pen(current: Pen | None, target: Pen | None, sgr: str) -> str:
    """The shortest SGR sequence that turns the pen ``current`` into ``target``."""
    if current is None or target is None:
        return select(sgr)
    flags, foreground, background = target
    params: list[str] = []
    dropped = current[0] - flags
    if dropped:
        params.extend(sorted({str(_FLAG_OFF[f]) for f in dropped}))
        # 22 turns off both bold and dim: set again whichever of them stays on
        if 22 in {_FLAG_OFF[f] for f in dropped}:
            params.extend(str(f) for f in sorted(flags & {1, 2}))
    params.extend(str(f) for f in sorted(flags - current[0]))
    if foreground != current[1]:
        params.append(foreground or "39")
    if background != current[2]:
        params.append(background or "49")
    delta = f"\x1b[{';'.join(params)}m"
    full = select(sgr)
    return delta if len(delta) < len(full) else full


def select(sgr: str) -> str:
    """Reset and set ``sgr`` in one sequence where it is a single one."""
    if not sgr:
        return RESET
    if sgr.count("\x1b[") == 1:
        return "\x1b[0;" + sgr[2:]
    return RESET + sgr


def pen_order(groups: dict[str, list[tuple[int, int]]], pen: Pen | None) -> list[str]:
    """The colours in an order that changes the pen with few bytes, from the terminal's
    ``pen``: each time the one nearest to the last (the same background, say, needs only the
    foreground; in screen order where they cost the same), then improved by moving runs of
    one to three colours elsewhere in the order while that saves bytes (docs/screen-diff.md).
    """
    sgrs = list(groups)
    count = len(sgrs)
    pens = [pen, *map(pen_of, sgrs)]
    # cost[a][b]: the bytes from pen a to the colour b (1 to count; 0 is the terminal's pen)
    cost = [[0, *(pen_cost(pens[a], sgr) for sgr in sgrs)] for a in range(count + 1)]
    left = list(range(1, count + 1))
    order: list[int] = []
    last = 0
    while left:
        costs = cost[last]
        last = min(left, key=costs.__getitem__)
        left.remove(last)
        order.append(last)
    if count >= 3:
        _shorten(order, cost)
    return [sgrs[i - 1] for i in order]


def _shorten(order: list[int], cost: list[list[int]]) -> None:
    """Move runs of one to three colours of ``order`` elsewhere in it while that makes the
    pen changes fewer bytes (or-opt; index 0 of ``cost`` is the pen the order starts from,
    and nothing follows its last colour)."""
    count = len(order)

    def step(a: int, b: int | None) -> int:
        return 0 if b is None else cost[a][b]

    moved = True
    while moved:
        moved = False
        for length in (1, 2, 3):
            for i in range(count - length + 1):
                first, last = order[i], order[i + length - 1]
                before = order[i - 1] if i else 0
                after = order[i + length] if i + length < count else None
                saved = cost[before][first] + step(last, after) - step(before, after)
                for j in range(count + 1):  # between order[j - 1] and order[j]
                    if i <= j <= i + length:
                        continue
                    a = order[j - 1] if j else 0
                    b = order[j] if j < count else None
                    if cost[a][first] + step(last, b) - step(a, b) < saved:
                        run = order[i : i + length]
                        del order[i : i + length]
                        at = j if j < i else j - length
                        order[at:at] = run
                        moved = True
                        break
                if moved:
                    break
            if moved:
                break


_pen_costs: dict[tuple[Pen | None, str], int] = {}


def pen_cost(pen: Pen | None, sgr: str) -> int:
    """The bytes that turn the pen ``pen`` into the colour ``sgr`` (0 if it is that)."""
    key = (pen, sgr)
    known = _pen_costs.get(key)
    if known is None:
        target = pen_of(sgr)
        known = 0 if target == pen else len(change_pen(pen, target, sgr))
        if len(_pen_costs) < 16384:
            _pen_costs[key] = known
    return known
