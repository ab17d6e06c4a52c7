"""Rows rebuilt into a DataTable (the jobs panel's) show untrusted text as written."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from gputop.tui.widgets.jobs_table import replace_rows


class OneTable(App[None]):
    def compose(self) -> ComposeResult:
        yield DataTable()


async def test_markup_and_control_characters_in_a_cell_are_shown_as_written() -> None:
    app = OneTable()
    async with app.run_test() as pilot:
        table: DataTable[Any] = app.query_one(DataTable)
        table.add_columns("NAME", "LOG")
        replace_rows(table, ["1"], {"1": ("[b]x[/b]", "[@click=app.quit]X[/]\x1b]0;t\x07")}, None)
        await pilot.pause()
        name, log = table.get_row_at(0)
        assert isinstance(name, Text) and name.plain == "[b]x[/b]" and not name.spans
        assert log.plain == "[@click=app.quit]X[/]\\e]0;t\\x07"


async def test_the_highlight_stays_on_its_row_when_rows_are_rebuilt() -> None:
    app = OneTable()
    async with app.run_test() as pilot:
        table: DataTable[Any] = app.query_one(DataTable)
        table.add_columns("ID")
        replace_rows(table, ["a", "b", "c"], {k: (k,) for k in "abc"}, None)
        table.move_cursor(row=1)
        replace_rows(table, ["c", "a", "b"], {k: (k,) for k in "abc"}, keep="b")
        await pilot.pause()
        assert table.cursor_row == 2
