"""Hostile text from outside gputop: shown as written, never obeyed, never read as markup.

Any user's process names, job names and commands, log lines and scenario strings reach the
screen. None of them may write to the terminal (OSC 52 sets the clipboard, OSC 0 the title,
``ESC[2J`` clears the screen, a newline forges a row), and none may be read as Textual or
Rich markup (``exp[/]1`` raises, ``[fast]`` vanishes, ``[@click=app.quit]`` is an action).
See docs/security.md. The CLI cases and the properties over renderings are in
test_hostile_cli.py, the real-terminal cases in test_hostile_terminal.py.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from helpers.dashboard import first_sample, make_app, plain_text
from helpers.hostile import (
    BIG,
    CLEAR,
    HOSTILE,
    OSC0,
    OSC52,
    add_job,
    drawn_controls,
    hostile_scenario,
    screen_text,
    terminal_bytes,
)
from helpers.jobs import asked_job
from helpers.scenarios import minimal_gpu
from helpers.waiting import pilot_wait_for
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from textual.geometry import Region
from textual.widgets import Input, Static
from textual.widgets._toast import Toast

from gputop.core.jobs.model import Job
from gputop.core.jobs.store import JobStore
from gputop.tui.screens.confirm import ConfirmScreen
from gputop.tui.screens.job_log import JobLogScreen
from gputop.tui.widgets.jobs_panel import JobsPanel

# -- markup: the cases, in the dashboard ----------------------------------------------


async def test_a_job_named_like_markup_does_not_stop_the_dashboard_from_starting() -> None:
    add_job("exp[/]1", ["python", "train.py"])
    add_job("sweep[seed=1]", ["python", "sweep.py"])
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("J")
        panel = app.query_one(JobsPanel)
        await pilot_wait_for(pilot, lambda: panel.row_count == 2, "both jobs in the panel")
        await pilot.pause()
        shown = screen_text(app)
        assert "exp[/]1" in shown
        assert "sweep[seed=1]" in shown


async def test_a_click_action_in_a_job_name_is_text_not_an_action() -> None:
    add_job("[@click=app.quit]X[/]", ["python", "[@click=app.quit]Y[/]"])
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("J")
        panel = app.query_one(JobsPanel)
        await pilot_wait_for(pilot, lambda: panel.row_count == 1, "the job in the panel")
        await pilot.pause()
        assert "[@click=app.quit]X[/]" in screen_text(app)
        strips = panel.render_lines(Region(0, 0, panel.size.width, panel.size.height))
        actions = [
            segment.style.meta
            for strip in strips
            for segment in strip
            if segment.style is not None and "@click" in segment.style.meta
        ]
        assert actions == []
        await pilot.click(JobsPanel, offset=(8, 2))  # on the name
        assert app.is_running


async def test_the_stop_dialog_shows_a_command_with_brackets_as_written() -> None:
    add_job("lr-sweep", ["python", "train.py", "[lr=3e-4]", "[fast]"])
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        panel = app.query_one(JobsPanel)
        await pilot_wait_for(pilot, lambda: panel.current_job is not None, "the job in the panel")
        await pilot.press("J", "K")  # J shows the jobs and focuses them
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        question = plain_text(app.screen.query_one("#question", Static), width=200)
        assert "python train.py [lr=3e-4] [fast]" in question
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmScreen)


async def test_the_terminate_dialog_names_the_command_with_its_brackets(
    scenario_file: Callable[..., str],
) -> None:
    process = {
        "pid": 3999999,
        "used_memory_mib": 100,
        "type": "C",
        "user": "alice",
        "cmd": ["python", "bench.py", "[fast]", "[lr=3e-4]", "[@click=app.quit]Z[/]"],
    }
    app = make_app(scenario_file([minimal_gpu(processes=[process])]))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("tab")
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        question = plain_text(app.screen.query_one("#question", Static), width=200)
        assert "Send SIGTERM to process 3999999 on GPU 0?" in question
        assert "python bench.py [fast] [lr=3e-4] [@click=app.quit]Z[/]" in question
        await pilot.press("n")


async def test_notifications_quote_data_as_plain_text() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG, notifications=True) as pilot:
        await first_sample(pilot)
        app.notify(f"Job 3 (exp[/]1 {OSC0}) launched")  # would raise as markup
        await pilot_wait_for(pilot, lambda: bool(app.screen.query(Toast)), "the notification")
        shown = app.screen.query_one(Toast).render().plain
        assert "Job 3 (exp[/]1 \\e]0;pwned-title\\x07) launched" in shown


# -- control characters: nothing from the data reaches the terminal ---------------------------


async def test_hostile_scenario_strings_are_drawn_as_visible_escapes(
    scenario_file: Callable[..., str],
) -> None:
    app = make_app(hostile_scenario(scenario_file))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.pause()
        assert drawn_controls(terminal_bytes(app), BIG[1]) == []
        assert "host\\e]52;c;aGVsbG8gY2xpcGJvYXJk\\x07" in screen_text(app)


async def test_a_job_log_keeps_its_colours_and_shows_other_escapes_as_text() -> None:
    job = add_job("coloured", ["python", "train.py"])
    with open(job.log_path, "wb") as log:
        log.write(b"\x1b[31mred text\x1b[0m " + OSC52.encode() + b"\n")
        log.write(b"epoch 1 " + CLEAR.encode() + OSC0.encode() + b"\n")
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        app.push_screen(JobLogScreen(job))
        await pilot_wait_for(pilot, lambda: "epoch 1" in screen_text(app), "the log's lines")
        assert drawn_controls(terminal_bytes(app), BIG[1]) == []
        shown = screen_text(app)
        assert "red text \\e]52;c;aGVsbG8gY2xpcGJvYXJk\\x07" in shown
        assert "epoch 1 \\e[2J\\e]0;pwned-title\\x07" in shown
        strips = app.screen._compositor.render_strips()
        red = [
            segment
            for strip in strips
            for segment in strip
            if "red text" in segment.text and segment.style and segment.style.color
        ]
        assert red, "the red text has a colour"
        colour = red[0].style.color.get_truecolor()
        assert colour.red > 2 * max(colour.green, colour.blue)  # the theme's red


async def _dashboard_output(scenario: str, state_dir: Path) -> tuple[str, str]:
    """What Textual writes for the whole dashboard, jobs shown, and the screen as text."""
    app = make_app(scenario, state_dir=state_dir)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("J")
        panel = app.query_one(JobsPanel)
        await pilot_wait_for(pilot, lambda: panel.row_count == 1, "the job in the panel")
        await pilot.pause()
        return terminal_bytes(app), screen_text(app)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(st.characters(codec="utf-8"), min_size=1, max_size=30))
@example(text=HOSTILE)
def test_no_control_character_of_any_text_reaches_the_dashboard(text: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        scenario = root / "scenario.json"
        gpu = minimal_gpu(name=f"NVIDIA {text}")
        document = {
            "description": text,
            "hostname": text,
            "driver_version": "550.1",
            "cuda_driver_version": 12040,
            "gpus": [gpu],
        }
        scenario.write_text(json.dumps(document))
        store = JobStore.open(root / "state")
        try:
            store.create_job(asked_job(name=text, cwd=directory, uuids=[gpu["uuid"]]))
        finally:
            store.close()
        output, _ = asyncio.run(_dashboard_output(str(scenario), root / "state"))
        assert drawn_controls(output, BIG[1]) == []


async def test_a_hostile_working_directory_is_shown_cleaned_and_used_as_it_is() -> None:
    # A short parent of its own, not tmp_path: the dialog cuts a path at its width, and
    # tmp_path's length depends on the runner (pytest-xdist adds a folder per worker).
    with tempfile.TemporaryDirectory(prefix="gputop-") as parent:
        await _hostile_working_directory(Path(parent) / f"runs{OSC0}")


async def _hostile_working_directory(directory: Path) -> None:
    directory.mkdir()
    app = make_app("v100x4", cwd=str(directory))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("l")
        await pilot.pause()
        assert drawn_controls(terminal_bytes(app), BIG[1]) == []
        assert "runs\\e]0;pwned-title\\x07" in screen_text(app)
        app.screen.query_one("#command", Input).value = "true"
        await pilot.press("enter")

        def recorded() -> list[Job]:
            store = JobStore.open()
            try:
                return store.list_jobs()
            finally:
                store.close()

        await pilot_wait_for(pilot, lambda: bool(recorded()), "the launched job")
        (job,) = recorded()
        assert job.cwd == str(directory)
