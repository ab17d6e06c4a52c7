"""A text field focused again keeps its text, the caret after it: Textual's ``Input`` selects
its whole value on focus, so the next key typed replaced what the user had typed."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers.dashboard import first_sample, make_app, open_launch_dialog
from textual.widgets import Input

import gputop.tui
from gputop.tui.screens.filter import FilterScreen

BIG = (160, 48)


async def test_tabbing_back_to_the_command_keeps_it_and_a_space_is_appended() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_launch_dialog(app, pilot)
        command = screen.query_one("#command", Input)
        assert command.has_focus
        await pilot.press(*"python train.py")
        # command -> cwd -> radio -> wait, and round again to the command
        for _ in range(8):
            await pilot.press("tab")
            if command.has_focus:
                break
        else:
            raise AssertionError("tab never came back to the command")
        await pilot.press("space")
        await pilot.pause()
        assert command.value == "python train.py "


async def test_tabbing_into_the_working_directory_keeps_it() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_launch_dialog(app, pilot)
        cwd = screen.query_one("#cwd", Input)
        before = cwd.value
        await pilot.press("tab")
        assert cwd.has_focus
        await pilot.press(*"/sub")
        await pilot.pause()
        assert cwd.value == before + "/sub"


async def test_the_filter_opened_again_keeps_the_filter_to_edit() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("slash", *"dav", "enter")
        await pilot.press("slash")
        assert isinstance(app.screen, FilterScreen)
        await pilot.press("e")
        await pilot.pause()
        assert app.screen.query_one(Input).value == "dave"


def test_every_text_field_of_the_dashboards_is_an_in_order_input() -> None:
    """Each field gputop makes is an ``InOrderInput`` (gputop/tui/textual_compat/), so that
    none selects its text on focus: no bare ``Input(...)`` anywhere else."""
    root = Path(gputop.tui.__file__).parent
    bare = [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in root.rglob("*.py")
        if "textual_compat" not in path.parts
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Input"
    ]
    assert bare == []
