"""ctrl+c inside a dialog: the hint names the keys that quit from there, and they do.

On the dashboard itself ctrl+c says "Press q to quit" (tests/tui/test_dashboard_keys_first_hour.py).
In a dialog q closes the dialog (or is typed into its field), so the hint says to close it
first; in the launch dialog's fields, where ctrl+c copies, it says so too when there is
nothing selected to copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.dashboard import first_sample, make_app
from helpers.waiting import pilot_wait_for
from textual.screen import ModalScreen
from textual.widgets import Input

from gputop.tui.app import GputopApp
from gputop.tui.screens.filter import FilterScreen
from gputop.tui.screens.health import HealthScreen
from gputop.tui.screens.help import HelpScreen
from gputop.tui.screens.launch import LaunchScreen
from gputop.tui.screens.process_detail import ProcessDetailScreen

BIG = (160, 48)
ONE_DIALOG = "Press escape to close this dialog, then q to quit (launched jobs keep running)."


def notifications(app: GputopApp) -> list[str]:
    return [str(n.message) for n in app._notifications]  # type: ignore[attr-defined]


DIALOGS = {
    "help": (("question_mark",), HelpScreen),
    "launch": (("l",), LaunchScreen),
    "filter": (("slash",), FilterScreen),
    "health": (("e",), HealthScreen),
    "process-detail": (("tab", "enter"), ProcessDetailScreen),
}


@pytest.mark.parametrize("dialog", DIALOGS)
async def test_ctrl_c_in_a_dialog_names_the_keys_that_quit_and_they_do(
    dialog: str, state_dir: Path
) -> None:
    keys, screen_class = DIALOGS[dialog]
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press(*keys)
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, screen_class), dialog)
        await pilot.press("ctrl+c")
        await pilot_wait_for(pilot, lambda: notifications(app), "a hint")
        assert notifications(app) == [ONE_DIALOG]
        assert isinstance(app.screen, screen_class)  # ctrl+c itself closes nothing
        await pilot.press("escape")
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, ModalScreen), "closed")
        await pilot.press("q")
        await pilot_wait_for(pilot, lambda: not app.is_running, "the dashboard to quit")


async def test_ctrl_c_in_the_launch_dialogs_command_field_with_text_typed(
    state_dir: Path,
) -> None:
    """The field takes ctrl+c to copy; with nothing selected there is nothing to copy, and
    the hint shows as anywhere else (the text typed kept)."""
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("l")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, LaunchScreen), "the dialog")
        field = app.screen.query_one("#command", Input)
        assert app.focused is field
        await pilot.press(*"python")
        await pilot.press("ctrl+c")
        await pilot_wait_for(pilot, lambda: notifications(app), "a hint")
        assert notifications(app) == [ONE_DIALOG]
        assert field.value == "python" and app.focused is field


async def test_ctrl_c_with_the_palette_over_a_dialog_counts_both() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("question_mark")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        await pilot.press("ctrl+p")
        await pilot_wait_for(pilot, lambda: len(app.screen_stack) == 3, "the palette")
        await pilot.press("ctrl+c")
        await pilot_wait_for(pilot, lambda: notifications(app), "a hint")
        assert notifications(app) == [
            "Press escape 2 times to close the dialogs, then q to quit "
            "(launched jobs keep running)."
        ]
        await pilot.press("escape", "escape")
        await pilot_wait_for(pilot, lambda: len(app.screen_stack) == 1, "both closed")
        await pilot.press("q")
        await pilot_wait_for(pilot, lambda: not app.is_running, "the dashboard to quit")


async def test_ctrl_c_with_text_selected_in_a_field_copies_it_and_says_nothing(
    state_dir: Path,
) -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("l")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, LaunchScreen), "the dialog")
        field = app.screen.query_one("#command", Input)
        await pilot.press(*"python train.py")
        field.select_all()
        await pilot.press("ctrl+c")
        await pilot_wait_for(pilot, lambda: app.clipboard == "python train.py", "the copy")
        assert notifications(app) == []
