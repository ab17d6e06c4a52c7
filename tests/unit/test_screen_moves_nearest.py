"""The screen diff's cheaper checks give what the plain ones give: its tour picks each next
chain by ``_nearest``, ``move_cost`` written out in one loop (the same head and cost as
asking ``move_cost`` of each head in turn), and a row to its end is narrow by
``_all_narrow`` as each of its cells is by ``_narrow``."""

from __future__ import annotations

import random

from gputop.tui.screen_moves import _nearest, _reach, move_cost, tour


def _nearest_by_move_cost(
    heads: list[int],
    runs: list[tuple[int, int, int]],
    row: int,
    column: int,
    columns: int,
    feeds: bool,
) -> tuple[int, int]:
    nearest, cheapest = -1, 0
    for head in heads:
        cost = move_cost(runs[head][0], runs[head][1], row, column, columns, feeds)
        if nearest < 0 or cost < cheapest:
            nearest, cheapest = head, cost
    return nearest, cheapest


def test_the_nearest_head_is_the_one_move_cost_finds() -> None:
    chance = random.Random(44)
    for _ in range(20_000):
        columns = chance.choice([20, 80, 200, 1200])
        lines = chance.choice([10, 50, 300])
        runs = [
            (chance.randrange(lines), chance.randrange(columns), chance.randrange(columns))
            for _ in range(chance.randint(1, 40))
        ]
        heads = sorted(chance.sample(range(len(runs)), chance.randint(1, len(runs))))
        if chance.random() < 0.1:
            row, column = -1, -1  # the cursor not known
        else:
            row, column = chance.randrange(-1, lines), chance.randrange(-1, columns + 2)
            if chance.random() < 0.3 and runs:  # near a run: the small relative moves
                near = runs[chance.choice(heads)]
                row = max(near[0] + chance.randint(-4, 4), -1)
                column = near[2] + chance.randint(-5, 5)
        feeds = chance.random() < 0.5
        assert _nearest(heads, _reach(runs), row, column, columns, feeds) == _nearest_by_move_cost(
            heads, runs, row, column, columns, feeds
        )


def test_a_tour_still_visits_every_run_once() -> None:
    chance = random.Random(7)
    for _ in range(500):
        runs = sorted(
            (chance.randrange(50), x, x + chance.randint(1, 8))
            for x in (chance.randrange(200) for _ in range(chance.randint(0, 60)))
        )
        order = tour(runs, (chance.randrange(-1, 50), chance.randrange(-1, 200)), 200, True)
        assert sorted(order) == list(range(len(runs)))


def test_a_row_is_narrow_to_its_end_as_each_of_its_cells_is() -> None:
    from gputop.tui.screen_diff import _all_narrow, _narrow

    chance = random.Random(3)
    alphabet: list[str | None] = ["a", " ", "▁", "▇", "世", "é", "", None, "\u0301", "😀"]
    for _ in range(20_000):
        chars = [chance.choice(alphabet) for _ in range(chance.randint(0, 12))]
        assert _all_narrow(chars) == all(map(_narrow, chars))
