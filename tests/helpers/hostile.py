"""Hostile text for the tests: terminal commands, markup, and ways to find what leaked.

See docs/security.md for the guarantees the tests check.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable

from rich.console import Console

from gputop.core.jobs.model import Job
from gputop.core.jobs.store import JobStore
from gputop.tui.app import GputopApp
from helpers.jobs import asked_job
from helpers.scenarios import minimal_gpu

OSC52 = "\x1b]52;c;aGVsbG8gY2xpcGJvYXJk\x07"
OSC0 = "\x1b]0;pwned-title\x07"
CLEAR = "\x1b[2J"
HOSTILE = f"{OSC52}{OSC0}{CLEAR}[/]\nforged row\r\x9b2J\u202e"
"""Every kind of trouble at once: terminal commands, markup, a newline, C1, a bidi override."""
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
RICH_SGR = re.compile("\x1b\\[[0-9;]*m")
BIG = (160, 48)
V100_1 = "GPU-96870f72-ff47-4de2-1bb0-99f7d8338c12"


def controls_left(rendered: str) -> list[str]:
    """Control characters in a rendering, once the renderer's own colours and line breaks
    are taken out: anything left came from the data."""
    return CONTROL.findall(RICH_SGR.sub("", rendered).replace("\n", ""))


def drawn_controls(output: str, rows: int) -> list[str]:
    """Control characters in what Textual writes for a screen, besides its own colours,
    cursor moves and the line breaks between the screen's rows."""
    assert output.count("\n") < rows, "more line breaks than the screen has rows"
    return CONTROL.findall(re.sub("\x1b\\[[0-9;]*[mH]", "", output).replace("\n", ""))


def rendered(*renderables: object, width: int = 200) -> str:
    """What Rich writes to a colour terminal for these renderables."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system="truecolor")
    for renderable in renderables:
        console.print(renderable)
    return out.getvalue()


def add_job(name: str, command: list[str]) -> Job:
    """A job recorded as waiting in the test's store (nothing is started)."""
    store = JobStore.open()
    try:
        job = store.create_job(
            asked_job(
                name=name,
                command=command,
                cwd="/tmp",
                physical_indices=[1],
                uuids=[V100_1],
                env={"CUDA_VISIBLE_DEVICES": V100_1},
            )
        )
        return store.get(job.id)
    finally:
        store.close()


def screen_text(app: GputopApp) -> str:
    """The whole screen as text, the way the compositor will draw it."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


def terminal_bytes(app: GputopApp) -> str:
    """Exactly what Textual would write to the terminal for the current screen."""
    return app.screen._compositor.render_full_update().render_segments(app.console)


def hostile_scenario(write: Callable[..., str], **gpu: object) -> str:
    return write(
        [minimal_gpu(name=f"NVIDIA {HOSTILE}", **gpu)],
        description=f"desc {HOSTILE}",
        hostname=f"host{HOSTILE}",
        driver_version=f"550.{HOSTILE}",
    )
