"""The terminal driver that writes only what changed: Textual's own, with a ``ScreenDiff``
(``screen_diff.py``) between Textual and the terminal.

``DashboardApp.get_driver_class`` installs it (Textual's hook for choosing the driver);
``settings.SCREEN_DIFF`` at 0 turns it off. While the dashboard runs, its terminal passes line
feeds as they are (``ONLCR`` off), so the diff moves down a row with one byte. See
docs/screen-diff.md.
"""

from __future__ import annotations

import os
import termios
import threading
import weakref
from collections.abc import Mapping
from typing import Any

from gputop.core import settings
from gputop.tui.screen_diff import ScreenDiff
from gputop.tui.textual_compat import LinuxDriver, QuietInput, terminal_fd


class DiffingLinuxDriver(QuietInput):
    """Textual's terminal driver, writing only what changed on the screen (and whose input
    thread sleeps while there is nothing to read: ``QuietInput``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._screen_diff = ScreenDiff()
        self._screen_diff_lock = threading.Lock()
        _drivers.add(self)

    def start_application_mode(self) -> None:
        """Also on resuming after a suspend (ctrl+z, then ``fg``): whatever ran meanwhile may
        have left a scrolling region, newline mode or a colour set, as for ``ctrl+l``."""
        super().start_application_mode()
        feeds = keep_line_feeds(terminal_fd(self))
        with self._screen_diff_lock:
            self._screen_diff.redraw()
            self._screen_diff.line_feeds = feeds

    def stop_application_mode(self) -> None:
        with self._screen_diff_lock:  # the terminal's own settings are back from here on
            self._screen_diff.line_feeds = False
            reset = self._screen_diff.release_pen()  # a frame leaves its last colour set
        if reset:
            super().write(reset)
        super().stop_application_mode()

    def forget_screen(self) -> None:
        """Send the next frames whole: the terminal may show something else (``ctrl+l``)."""
        with self._screen_diff_lock:
            self._screen_diff.redraw()

    def write(self, data: str) -> None:
        with self._screen_diff_lock:
            if self._screen_diff.line_feeds:  # turned back on meanwhile (stty onlcr): off
                self._screen_diff.line_feeds = keep_line_feeds(terminal_fd(self))
            data = self._screen_diff.filter(data, self._terminal_size())
        if data:
            super().write(data)

    def _terminal_size(self) -> tuple[int, int] | None:
        try:
            size = os.get_terminal_size(terminal_fd(self))
        except OSError:
            return None
        return size.columns, size.lines


_drivers: weakref.WeakSet[DiffingLinuxDriver] = weakref.WeakSet()


def keep_line_feeds(fd: int) -> bool:
    """Have the terminal ``fd`` pass a line feed as it is (``ONLCR`` off: curses' ``nonl``),
    for as long as the application runs: Textual restores the terminal's settings as they
    were when it leaves (or is suspended), and sets them again when it resumes. False if
    the settings cannot be read or changed. Asked again before every write (3.8 us, one
    ``tcgetattr``): another program may turn ``ONLCR`` back on (``stty onlcr``)."""
    try:
        attrs = termios.tcgetattr(fd)
        if attrs[1] & termios.OPOST and attrs[1] & termios.ONLCR:
            attrs[1] &= ~termios.ONLCR
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
    except (termios.error, OSError):
        return False
    return True


def forget_screens() -> None:
    """Every diffing driver of this process forgets what its terminal shows, so the next
    repaint reaches every cell (``ctrl+l``: something else may have written on it)."""
    for driver in list(_drivers):
        driver.forget_screen()


def driver_with_screen_diff(driver_class: type[Any], environ: Mapping[str, str]) -> type[Any]:
    """The driver to use instead of ``driver_class``: for Textual's own, the diffing one, or
    with the diff switched off one that writes as Textual's does (``QuietInput``: its input
    thread sleeps while idle and stops when the terminal goes away).

    Any other driver (Windows, one named by Textual's own ``TEXTUAL_DRIVER``, the headless
    one of tests) is kept as it is.
    """
    if driver_class is not LinuxDriver:
        return driver_class
    return DiffingLinuxDriver if settings.SCREEN_DIFF.on(environ) else QuietInput
