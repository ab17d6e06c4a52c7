"""The history screens' plots (gputop/core/history/plot.py): heights in eighths of a row."""

from __future__ import annotations

from gputop.core.history.plot import column_rows, labelled_plot, time_axis
from gputop.core.history.series import GAP


def columns(rows: list[str], index: int) -> str:
    """One column of a plot, bottom row first."""
    return "".join(row[index] for row in reversed(rows))


def test_a_column_stands_as_high_as_its_share_of_the_top_in_eighths_of_a_row() -> None:
    rows = column_rows([100.0, 50.0, 0.0, 12.5, 62.5], 100.0, 4)
    assert len(rows) == 4 and all(len(row) == 5 for row in rows)
    assert columns(rows, 0) == "████"
    assert columns(rows, 1) == "██  "
    assert columns(rows, 2) == "    "
    assert columns(rows, 3) == "▄   "  # 4 of 32 eighths
    assert columns(rows, 4) == "██▄ "  # 20 of 32


def test_a_value_above_zero_is_never_drawn_as_nothing_and_none_is_a_gap() -> None:
    rows = column_rows([0.01, None, 250.0, -3.0], 100.0, 3)
    assert columns(rows, 0) == "▁  "
    assert columns(rows, 1) == f"{GAP}  "
    assert columns(rows, 2) == "███"  # above the top: clipped to it
    assert columns(rows, 3) == "   "  # below zero: nothing
    assert column_rows([5.0, None], None, 2) == ["  ", GAP * 2]  # no scale: nothing to draw


def test_the_scale_is_written_by_the_top_and_bottom_rows() -> None:
    lines = labelled_plot([100.0, 0.0], 100.0, 3, lambda value: f"{value:.0f}%", 6)
    assert lines == ["  100%┤█ ", "      ┤█ ", "    0%┤█ "]


def test_the_time_axis_names_the_windows_start_middle_and_end() -> None:
    assert time_axis(0.0, 3600.0, 40, 6).split() == ["-1h", "-30m", "now"]
    assert time_axis(0.0, 7 * 86400.0, 40, 6).split() == ["-7d", "-84h", "now"]
    axis = time_axis(0.0, 86400.0, 40, 6)
    assert axis.startswith(" " * 7 + "-1d") and axis.endswith("now")
    assert len(axis) == 7 + 40
    assert time_axis(0.0, 86400.0, 9, 6).split() == ["-1d", "now"]  # no room for the middle
