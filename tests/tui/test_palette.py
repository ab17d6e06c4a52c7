"""ctrl+p offers every dashboard action by name, and choosing one runs it (issue 28)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from helpers.dashboard import first_sample, make_app
from textual.command import CommandInput, CommandPalette
from textual.pilot import Pilot
from textual.widgets import OptionList

from gputop.tui.app import GputopApp
from gputop.tui.lab.lab_app import LabApp
from gputop.tui.lab.lab_grid import LabGrid
from gputop.tui.lab.lab_jobs import LabJobsPanel
from gputop.tui.palette import ACTIONS, NAVIGATION
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.jobs_panel import JobsPanel
from gputop.tui.widgets.process_table import ProcessTable

DASHBOARD = (GputopApp, GpuGrid, ProcessTable, JobsPanel, LabApp, LabGrid, LabJobsPanel)
LAB_ONLY = {"jump_host(1)", "jump_host(-1)", "collapse_host", "collapse_all", "filter_host"}
BIG = (160, 48)
WAIT_S = 20.0


def _bound_actions() -> set[str]:
    return {
        binding.action if hasattr(binding, "action") else binding[1]
        for cls in DASHBOARD
        for base in cls.__mro__
        if base.__module__.startswith("gputop.")  # gputop's own, not Textual's scrolling
        for binding in base.__dict__.get("BINDINGS", ())
    }


def test_every_bound_action_has_a_name_in_the_palette() -> None:
    assert sorted(_bound_actions() - NAVIGATION - set(ACTIONS)) == []


def test_every_named_action_is_bound() -> None:
    assert sorted(set(ACTIONS) - _bound_actions()) == []


async def _search(
    app: GputopApp, pilot: Pilot[None], query: str, expect: Callable[[list[str]], bool]
) -> list[str]:
    """Open the palette, type ``query``; the titles it lists once ``expect`` holds of them
    (or after ``WAIT_S``: the palette searches in the background)."""
    if not isinstance(app.screen, CommandPalette):
        await pilot.press("ctrl+p")
    deadline = time.monotonic() + WAIT_S
    while not isinstance(app.screen, CommandPalette):
        assert time.monotonic() < deadline, "the palette never opened"
        await pilot.pause(0.05)
    app.screen.query_one(CommandInput).value = query
    results = app.screen.query_one(OptionList)
    found: list[str] = []
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        found = [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]
        if expect(found):
            break
    return found


async def test_the_palette_finds_each_action_by_its_name() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        for action, (title, _) in ACTIONS.items():
            if action in LAB_ONLY:
                continue
            word = title.split()[0].lower()
            found = await _search(app, pilot, word, lambda f, t=title: any(t in s for s in f))
            assert any(title in shown for shown in found), (word, title, found)


@pytest.mark.parametrize("word", ["launch", "sort", "sel", "select", "filter", "mine", "kill"])
async def test_the_words_a_new_user_tries_find_commands(word: str) -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        found = await _search(app, pilot, word, lambda f: any(word in s.lower() for s in f))
        assert any(word in shown.lower() for shown in found), found


async def test_choosing_a_command_runs_it() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        assert table.sort_index == 0
        title = "Sort processes by the next column"
        first_is_sort = lambda f: bool(f) and title in f[0]  # noqa: E731
        found = await _search(app, pilot, "sort processes by the next", first_is_sort)
        assert found and title in found[0]
        await pilot.press("enter")
        deadline = time.monotonic() + WAIT_S
        while table.sort_index != 1:
            assert time.monotonic() < deadline, "the sort did not change"
            await pilot.pause(0.05)
        found = await _search(app, pilot, "only mine", lambda f: bool(f) and "Only mine" in f[0])
        assert "Only mine" in found[0]
        await pilot.press("enter")
        while not table.only_mine:
            assert time.monotonic() < deadline, "only mine was not turned on"
            await pilot.pause(0.05)
        assert all(row.process.user == "alice" for row in table.rows)


async def test_the_dashboard_across_hosts_names_its_own_actions() -> None:
    from helpers.lab_dashboard import first_lab_sample

    from gputop.tui.screenshots import build_lab_app

    app = build_lab_app(5)
    async with app.run_test(size=BIG) as pilot:
        await first_lab_sample(pilot)
        for action in sorted(LAB_ONLY):
            title = ACTIONS[action][0]
            word = title.split()[0].lower()
            found = await _search(app, pilot, word, lambda f, t=title: any(t in s for s in f))
            assert any(title in shown for shown in found), (title, found)


async def test_the_palette_s_keys_entry_opens_gputop_s_help() -> None:
    """Not Textual's key panel (it lists Textual's own keys and escape leaves it open)."""
    from gputop.tui.screens.help import HelpScreen

    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        found = await _search(app, pilot, "keys", lambda f: bool(f) and f[0].startswith("Keys"))
        assert [shown for shown in found if shown.startswith("Keys")] == [found[0]], found
        assert "focused widget" not in found[0], found
        await pilot.press("enter")
        deadline = time.monotonic() + WAIT_S
        while not isinstance(app.screen, HelpScreen):
            assert time.monotonic() < deadline, f"gputop's help did not open: {app.screen}"
            await pilot.pause(0.05)
        await pilot.press("escape")
        while isinstance(app.screen, HelpScreen):
            assert time.monotonic() < deadline, "escape left the help open"
            await pilot.pause(0.05)
        assert app.screen is app.screen_stack[0]
