"""Build the dashboard on a fixed scenario and a frozen clock, for Pilot and snapshot tests."""

from __future__ import annotations

import io

from rich.console import Console

from gputop.tui.screenshots import build_app as make_app

__all__ = ["make_app", "plain_text"]


def plain_text(widget: object, width: int = 120) -> str:
    """What a Static shows, as plain text, for assertions on wording."""
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(widget.content)  # type: ignore[attr-defined]
    return console.export_text()
