"""Build the dashboard on a fixed scenario and a frozen clock, for Pilot and snapshot tests."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Input, Static

from gputop.tui.app import GputopApp
from gputop.tui.screens.launch import LaunchScreen
from gputop.tui.screenshots import build_app as make_app
from helpers.waiting import pilot_wait_for

__all__ = [
    "first_sample",
    "launch",
    "make_app",
    "open_launch_dialog",
    "plain_text",
    "preview_text",
    "spy_on_refresh",
    "stays_true",
]

FIRST_SAMPLE_TIMEOUT_S = 30.0


async def first_sample(pilot: Pilot[None]) -> None:
    """Wait until the first snapshot is sampled and rendered.

    Sampling runs in a worker thread: on a loaded machine one ``pause()`` is not always enough
    for it, and a key pressed before the cards exist would act on nothing.
    """
    await pilot_wait_for(
        pilot,
        lambda: getattr(pilot.app, "snapshot", None) is not None,
        "the first snapshot",
        FIRST_SAMPLE_TIMEOUT_S,
    )
    await pilot.pause()


def plain_text(widget: object, width: int = 120) -> str:
    """What a Static shows, as plain text, for assertions on wording."""
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(widget.content)  # type: ignore[attr-defined]
    return console.export_text()


async def stays_true(pilot: Pilot[None], condition: Callable[[], bool], seconds: float) -> bool:
    """``condition()`` holds all along for ``seconds`` while the app runs (polled, never a
    blocking sleep): how a test says that something did *not* happen."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not condition():
            return False
        await pilot.pause(0.02)
    return condition()


# -- the launch dialog (tests/tui/test_dashboard_jobs.py, tests/tui/test_hostile_commands.py)


def preview_text(app: GputopApp) -> str:
    return plain_text(app.screen.query_one("#preview", Static), width=200)


async def open_launch_dialog(app: GputopApp, pilot: Pilot[None], *keys: str) -> LaunchScreen:
    await first_sample(pilot)
    await pilot.press(*keys, "l")
    await pilot.pause()
    assert isinstance(app.screen, LaunchScreen)
    return app.screen


async def launch(app: GputopApp, pilot: Pilot[None], command: str, cwd: Path) -> None:
    screen = app.screen
    screen.query_one("#cwd", Input).value = str(cwd)
    screen.query_one("#command", Input).value = command
    screen.query_one("#command", Input).focus()
    await pilot.press("enter")


def spy_on_refresh(widget: Widget) -> list[tuple[Region, ...]]:
    """The regions of each repaint ``widget`` asks for from now on (it still repaints)."""
    asked: list[tuple[Region, ...]] = []
    original = widget.refresh

    def spy(*regions: Region, **options: object) -> Widget:
        asked.append(regions)
        return original(*regions, **options)  # type: ignore[arg-type]

    widget.refresh = spy  # type: ignore[method-assign]
    return asked
