"""Every place gputop relies on Textual's internals, so that an upgrade is one package to
read: this file (the terminal driver and its input thread, the app on its way out, an
exception that reaches Textual, ctrl+c and ctrl+z) and ``paint.py`` (painting with fewer
steps than Textual's own), nothing else in gputop.

Everywhere else gputop uses Textual's public API (widgets, screens, messages, workers, the
Line API, ``App.get_driver_class``). What follows is not public: each item says what gputop
relies on, and tests/tui/test_textual_compat.py checks each assumption against the installed
Textual, one test per assumption (docs/architecture.md, "Textual's internals"). pyproject
pins the minor version these were checked with.
"""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import signal
import threading
import weakref
from codecs import getincrementaldecoder
from collections.abc import Callable
from typing import Any, TypeVar

from textual import events
from textual._loop import loop_last
from textual._xterm_parser import XTermParser
from textual.actions import SkipAction
from textual.app import App
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.drivers.linux_driver import LinuxDriver
from textual.screen import ModalScreen
from textual.widgets import Input

from gputop.core.process_control import stop_own_job
from gputop.tui.textual_compat.frame_timer import install_quiet_frame_timer
from gputop.tui.textual_compat.paint import (
    install_lean_filter,
    install_lean_strips,
    install_lean_styles,
    install_partial_updates,
    visual_strips,
)

__all__ = [
    "QUIT_HINT_BINDING",
    "ExceptionHook",
    "InOrderInput",
    "LinuxDriver",
    "QuietInput",
    "QuitHint",
    "app_closing",
    "install_lean_filter",
    "install_lean_strips",
    "install_lean_styles",
    "install_partial_updates",
    "install_quiet_frame_timer",
    "terminal_fd",
    "textual_handles_exception",
    "unless_closing",
    "visual_strips",
]

# -- The terminal driver (gputop/tui/diff_driver.py) -----------------------------------------
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


A = TypeVar("A", bound=App[Any])
M = TypeVar("M")


def unless_closing(handler: Callable[[A, M], None]) -> Callable[[A, M], None]:
    """A message handler that draws: a message that arrives while the app closes finds its
    widgets gone (``NoMatches``) and is dropped; at any other time that is an error."""

    @functools.wraps(handler)
    def handle(app: A, message: M) -> None:
        try:
            handler(app, message)
        except NoMatches:
            if app.is_running and not app_closing(app):
                raise

    return handle


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


# -- ctrl+c ------------------------------------------------------------------------------------
#
# Textual binds ctrl+c (``App.BINDINGS``, a system binding) to ``action_help_quit``, which
# notifies "Press [b]ctrl+q[/b] to quit the app", naming the first key bound to quit, with
# markup. gputop's notifications are plain text (docs/security.md), so the markup showed raw,
# and gputop's key is q. A modal screen hides the app's bindings (``Screen._modal_binding_chain``),
# Textual's ctrl+c with them: in a dialog ctrl+c did nothing at all, and in a field of one
# (``Input``) it copies, nothing when nothing is selected. On a screen that is no dialog (the
# fleet's) it said q quits, where q closes the screen. ``QUIT_HINT_BINDING`` replaces
# Textual's ctrl+c: with priority, so it is heard over a dialog, and it gives way
# (``SkipAction``) to a copy where there is text selected, in the focused field or on the
# screen; its hint says how to close what is open first.

QUIT_HINT_BINDING = Binding("ctrl+c", "help_quit", show=False, priority=True, system=True)
"""ctrl+c: ``QuitHint``'s hint, in a dialog too; a copy where text is selected."""


class QuitHint:
    """Mix in before ``App`` (with ``QUIT_HINT_BINDING`` in its bindings): ctrl+c says, in
    plain words, which keys quit from where the person is."""

    QUIT_WORDS = "q to quit (launched jobs keep running)"

    def action_help_quit(self) -> None:
        app: App[Any] = self  # type: ignore[assignment]
        if _text_selected(app):
            raise SkipAction()  # the copy of the field or screen bound after this one
        app.notify(quit_hint(app, self.QUIT_WORDS), title="Do you want to quit?")


def quit_hint(app: App[Any], quit_words: str) -> str:
    """The hint: "Press q to quit", or, with screens open over the app's first, how to
    close them first (each of gputop's closes on escape)."""
    above = app.screen_stack[1:]
    if not above:
        return f"Press {quit_words}."
    kind = "dialog" if all(isinstance(screen, ModalScreen) for screen in above) else "screen"
    if len(above) == 1:
        return f"Press escape to close this {kind}, then {quit_words}."
    return f"Press escape {len(above)} times to close the {kind}s, then {quit_words}."


def _text_selected(app: App[Any]) -> bool:
    """Whether ctrl+c has something to copy: a focused field's selection, or the screen's."""
    focused = app.focused
    if isinstance(focused, Input) and focused.selected_text:
        return True
    return app.screen.get_selected_text() is not None


# -- Editing keys in the order they were typed ----------------------------------------------
#
# A key the focused widget does not take in its ``_on_key`` bubbles to its parent through the
# message queue, and a binding of the widget's runs only when the bubbled key comes round
# (``App.check_bindings``), after the keys read with it in the same read of the terminal:
# ``Input`` given "abc", backspace, "d" in one read (keys an ssh link delivers together, a
# paste without bracketed paste) inserted the d before the backspace ran and showed "abc";
# ctrl+u then "python train.py" deleted what was typed. ``InOrderInput`` runs its own editing
# bindings as each key arrives; a priority binding is still checked before it (by the app).
#
# ``Input`` also selects its whole value when focused (``select_on_focus``, on by default):
# tabbing back to a command typed in the launch dialog, or opening the filter on the one
# there is, selected it, and the next key (a space) replaced it. An ``InOrderInput`` keeps
# its text, the caret where it was (after the text typed or set).

_INPUT_ACTIONS = {
    key.strip(): binding.action
    for binding in Input.BINDINGS
    if isinstance(binding, Binding)
    for key in binding.key.split(",")
}


class InOrderInput(Input):
    """An ``Input`` whose editing keys act in the order they were typed, and whose text is
    kept, not selected, when it is focused."""

    def __init__(self, *args: Any, select_on_focus: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, select_on_focus=select_on_focus, **kwargs)

    async def _on_key(self, event: events.Key) -> None:
        action = next((_INPUT_ACTIONS[k] for k in event.aliases if k in _INPUT_ACTIONS), None)
        if action is None:
            await super()._on_key(event)
            return
        event.stop()
        event.prevent_default()
        self._restart_blink()
        await self.run_action(action)


# -- An input thread that sleeps until there is input -----------------------------------------
#
# ``LinuxDriver.run_input_thread`` waits for the terminal with ``select(0.1)``: it wakes ten
# times a second with nothing to read, to see whether it should stop (``exit_event``) and to
# let the parser time out a lone escape (``XTermParser.tick``, due once ``_timeout_time`` is
# set). On the busy server's bench those wake-ups were 1.75 ms of CPU a second, a twentieth of
# the dashboard's. ``QuietInput`` runs the same loop (Textual 8.2's, the same calls in the
# same order) with two differences: it waits without a timeout while the parser has nothing
# pending (0.1 s while it has, as before), and its ``exit_event`` also wakes the loop through
# a pipe when set, so quitting and suspending are as quick as before.
#
# Two more, for a terminal that goes away (an SSH connection dropped, a terminal window
# closed) under a gputop that does not die of the hangup (SIGHUP ignored: ``nohup``, a
# wrapper, a process manager). Textual's loop reads the end of file a hung-up terminal gives,
# again and again, at once: it spun, and the kernel's SIGCONT to the session leader on hangup
# made Textual resume its application mode and start a second input thread, spinning too
# (1.3 cores, for ever). ``QuietInput`` stops reading at the end of file and asks the app to
# exit (status 129, as a shell reports a hangup), and resumes on SIGCONT only after it
# suspended itself (a stop signal, SIGTSTP). docs/faults.md, "The terminal goes away".

IDLE_INPUT_WAIT_S: float | None = None
"""How long the input thread waits with nothing pending: until input or its exit event."""
HANGUP_RETURN_CODE = 129
"""The app's return code when its terminal went away (128 + SIGHUP, as a shell says it)."""


class _WakingEvent(threading.Event):
    """``exit_event`` that, when set, also writes to a pipe the input loop waits on."""

    def __init__(self, wake_fd: int, drain_fd: int) -> None:
        super().__init__()
        self._wake_fd, self._drain_fd = wake_fd, drain_fd

    def set(self) -> None:
        super().set()
        with contextlib.suppress(BlockingIOError, OSError):  # full: it is awake anyway
            os.write(self._wake_fd, b"x")

    def clear(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):  # nothing written
            os.read(self._drain_fd, 4096)
        super().clear()


class QuietInput(LinuxDriver):
    """``LinuxDriver`` whose input thread sleeps while there is nothing to read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.exit_event = _WakingEvent(self._wake_write, self._wake_read)
        self._wake_pipe_finalizer = weakref.finalize(
            self, _close_fds, (self._wake_read, self._wake_write)
        )

    def run_input_thread(self) -> None:
        """Textual's loop (``LinuxDriver.run_input_thread``), waiting without a timeout
        while the parser has no escape sequence to time out."""
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(self._wake_read, selectors.EVENT_READ)
        fileno = self.fileno
        parser = XTermParser(self._debug)
        feed, tick = parser.feed, parser.tick
        decode = getincrementaldecoder("utf-8")().decode

        def process_selector_events(
            selector_events: list[tuple[selectors.SelectorKey, int]], final: bool = False
        ) -> bool:
            """False once the terminal gave the end of file (it went away)."""
            events = [event for event in selector_events if event[0].fd == fileno]
            for last, (_selector_key, mask) in loop_last(events):
                if mask & selectors.EVENT_READ:
                    try:
                        data = os.read(fileno, 1024 * 4)
                    except OSError:  # EIO: a terminal that hung up, on some systems
                        data = b""
                    if not data:
                        return False
                    for event in feed(decode(data, final=final and last)):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)
            return True

        try:
            while not self.exit_event.is_set():
                pending = parser._timeout_time is not None
                if not process_selector_events(
                    selector.select(0.1 if pending else IDLE_INPUT_WAIT_S)
                ):
                    self._terminal_gone()
                    return
            selector.unregister(self.fileno)
            process_selector_events(selector.select(0.1), final=True)
        finally:
            selector.close()

    def _terminal_gone(self) -> None:
        """Ask the app to exit: nobody can see or use it any more."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: it is exiting anyway
            self._loop.call_soon_threadsafe(self._app.exit, None, HANGUP_RETURN_CODE)

    def _sigcont_application(self, *_: Any) -> None:
        """Resume on SIGCONT only after a suspend (SIGTSTP): Textual resumes on any, and
        a second input thread then reads beside the first (the kernel sends SIGCONT with the
        hangup of a terminal; anyone may send one)."""
        if self._must_signal_resume:
            super()._sigcont_application()


def stop_with_its_job(app: App[Any]) -> bool:
    """Stop the app's whole process group (its job: ``make demo`` waiting on it, say), as
    the terminal's own ctrl+z would, once the terminal is given back; False where the app's
    driver cannot be suspended. The app leaves its application mode first, while it still
    holds the terminal: stopping the group at once (Textual's handler runs later, in the main
    thread) let a waiting shell take the terminal first, and the app, writing to a terminal
    no longer its own, was stopped by SIGTTOU halfway through leaving it. On ``fg`` the
    SIGCONT handler resumes it (``_must_signal_resume``, as Textual's SIGTSTP handler sets)."""
    driver = app._driver
    if not isinstance(driver, QuietInput):
        return False
    app._suspend_signal()
    driver.suspend_application_mode()
    driver._must_signal_resume = True
    previous = signal.signal(signal.SIGTSTP, signal.SIG_DFL)  # not Textual's handler again
    try:
        stop_own_job()  # this thread stops here; fg continues it
    finally:
        signal.signal(signal.SIGTSTP, previous)
    return True


def _close_fds(fds: tuple[int, ...]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
