"""``render.sparkline`` by its look-up table draws what the arithmetic per point drew."""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Sequence

from rich.text import Text

from gputop.tui.render import SPARK_CHARS, sparkline


def _old_sparkline(series: Sequence[float | None], width: int, style: str = "cyan") -> Text:
    """The implementation before the table, kept as the reference."""
    if width <= 0:
        return Text()
    recent = list(series)[-width:]
    chars = []
    for value in recent:
        if value is None:
            chars.append(" ")
        else:
            level = round(max(0, min(100, value)) / 100 * (len(SPARK_CHARS) - 1))
            chars.append(SPARK_CHARS[max(level, 1)])
    return Text("".join(chars).rjust(width), style=style)


def _value(rng: random.Random) -> float | None:
    kind = rng.randrange(6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.randint(-30, 130)  # outside 0-100 as well
    if kind == 2:
        return rng.choice([6.25, 18.75, 31.25, 43.75, 56.25, 68.75, 81.25, 93.75])  # ties
    if kind == 3:
        return rng.uniform(-10.0, 110.0)
    if kind == 4:
        return rng.choice([math.nan, math.inf, -math.inf, True, False, 0, 100, 0.0, 100.0])
    return rng.randint(0, 100)


def test_the_same_line_as_before_for_many_random_series() -> None:
    rng = random.Random(44)
    for _ in range(5_000):
        series = [_value(rng) for _ in range(rng.randrange(0, 80))]
        width = rng.randrange(-2, 70)
        style = rng.choice(["cyan", "green", "dim"])
        want = _old_sparkline(series, width, style)
        for shaped in (series, tuple(series), deque(series)):
            got = sparkline(shaped, width, style)  # type: ignore[arg-type]
            assert (got.plain, got.style) == (want.plain, want.style), (series, width)


def test_every_whole_percent_and_a_gap() -> None:
    series = [None, *range(-5, 106)]
    assert sparkline(series, len(series)).plain == _old_sparkline(series, len(series)).plain
    assert sparkline([None, 0, 50, 100], 6).plain == "   ▁▄█"
