"""Build the dashboard on a fixed scenario and a frozen clock, for Pilot and snapshot tests."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from rich.console import Console
from textual.pilot import Pilot

from gputop.tui.screenshots import build_app as make_app

__all__ = ["first_sample", "make_app", "plain_text", "stays_true"]

FIRST_SAMPLE_TIMEOUT_S = 30.0


async def first_sample(pilot: Pilot[None]) -> None:
    """Wait until the first snapshot is sampled and rendered.

    Sampling runs in a worker thread: on a loaded machine one ``pause()`` is not always enough
    for it, and a key pressed before the cards exist would act on nothing.
    """
    deadline = time.monotonic() + FIRST_SAMPLE_TIMEOUT_S
    while getattr(pilot.app, "snapshot", None) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"no snapshot after {FIRST_SAMPLE_TIMEOUT_S} s")
        await pilot.pause(0.05)
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
