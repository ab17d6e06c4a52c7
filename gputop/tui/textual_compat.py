"""Every place gputop relies on Textual's internals, so that an upgrade is one file to read.

Everywhere else gputop uses Textual's public API (widgets, screens, messages, workers, the
Line API, ``App.get_driver_class``). What follows is not public: each item says what gputop
relies on, and tests/tui/test_textual_compat.py checks each assumption against the installed
Textual, one test per assumption (docs/architecture.md, "Textual's internals"). pyproject
pins the minor version these were checked with.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App
from textual.drivers.linux_driver import LinuxDriver
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual, visualize
from textual.widget import Widget

__all__ = [
    "ExceptionHook",
    "LinuxDriver",
    "app_closing",
    "terminal_fd",
    "textual_handles_exception",
    "visual_strips",
]

# -- The terminal driver (gputop/tui/screen_diff.py) -----------------------------------------
#
# ``LinuxDriver`` (``textual.drivers.linux_driver``) is what ``App.get_driver_class()``
# returns on Linux and macOS when ``TEXTUAL_DRIVER`` names no other. Everything Textual sends
# to the terminal goes through its ``write(str)``, so the screen diff subclasses it and
# rewrites what passes there.


def terminal_fd(driver: LinuxDriver) -> int:
    """The terminal's descriptor (``LinuxDriver.fileno``): its size is the screen's."""
    return driver.fileno


# -- The app on its way out ------------------------------------------------------------------


def app_closing(app: App[Any]) -> bool:
    """Whether ``app`` is on its way out: ``exit()`` was called (``App._exit``) or Textual is
    closing it (``App._closing``). A message handled then may find its widgets gone
    (``NoMatches``), which is no error; ``is_running`` stays true until the very end."""
    return bool(app._exit or app._closing)


# -- An exception that reaches Textual -------------------------------------------------------
#
# Textual has no public hook for an exception that escapes a handler (or a worker that exits
# on error): every one goes to ``App._handle_exception``, which sets the return code to 1,
# and exits through ``panic`` with the exception's Rich rendering where it has ``__rich__``
# (the terminal restored), else with a traceback.


class ExceptionHook:
    """Mix in before ``App``: an exception that reaches Textual goes to
    ``exception_reached_textual``, whose default is Textual's own handling."""

    def _handle_exception(self, error: Exception) -> None:
        self.exception_reached_textual(error)

    def exception_reached_textual(self, error: Exception) -> None:
        textual_handles_exception(self, error)


def textual_handles_exception(app: Any, error: Exception) -> None:
    """Textual's own handling of ``error``: the app exits with status 1, showing ``error``'s
    Rich rendering where it has one (an empty one shows nothing)."""
    App._handle_exception(app, error)


# -- A widget's text as Textual renders it (gputop/tui/widgets/gpu_card.py) ------------------


def visual_strips(
    widget: Widget, text: Text, width: int, height: int, style: VisualStyle
) -> list[Strip]:
    """``text`` as ``widget`` renders its content, line by line: the strips
    ``Widget.render_lines`` gives for it (``textual.visual``: ``visualize`` and
    ``Visual.to_strips`` are how a widget renders what ``render`` returns)."""
    return Visual.to_strips(widget, visualize(widget, text), width, height, style)
