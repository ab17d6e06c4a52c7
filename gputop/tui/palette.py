"""The command palette (ctrl+p): every dashboard action by name, with its key.

Commands come from the dashboard's own bindings (the app's and those of its card grid,
process table and jobs panel), so a key bound is an action named; ``ACTIONS`` gives each a
title a person would search for ("launch", "sort", "select") and a line of help. Navigation
(moving a highlight) is left to the keys. tests/tui/test_palette.py ties ``ACTIONS`` to the
bindings both ways. Public Textual API only: ``App.get_system_commands`` and ``SystemCommand``.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen

NAVIGATION = frozenset(
    {
        "move(-1)",
        "move(1)",
        "move_row(-1)",
        "move_row(1)",
        "cursor_up",
        "cursor_down",
        "cursor_page_up",
        "cursor_page_down",
        "cursor_first",
        "cursor_last",
        "quit",  # Textual's own palette already offers "Quit the application"
        "help",  # ... and "Keys", which GputopApp.get_system_commands makes ours (?)
        "help_quit",  # ctrl+c, Textual's key: how to quit from where one is
    }
)
"""Bound actions the palette leaves to their keys."""

ACTIONS: dict[str, tuple[str, str]] = {
    "launch": ("Launch a command on the selected cards", "l · detached, or in a tmux window"),
    "toggle_card": ("Select card: add or remove the highlighted card", "space"),
    "select_all": ("Select all cards", "a"),
    "clear_selection": ("Clear the selection of cards", "escape"),
    "next_instance": ("Select next MIG instance of the highlighted card", "m · MIG cards"),
    "filter_card": ("Filter processes to the highlighted card (again: all)", "f"),
    "filter_text": ("Filter processes by text: a user, a command, a pid", "/"),
    "only_mine": ("Only mine: show only your own processes (again: all)", "u"),
    "cycle_sort": ("Sort processes by the next column", "s"),
    "reverse_sort": ("Sort processes in reverse order", "S"),
    "resort": ("Re-sort processes now, exactly by what is shown", "o"),
    "toggle_torch": ("PyTorch view: show or hide cuda:N → physical cards", "p"),
    "toggle_jobs": ("Jobs: show or hide the jobs gputop launched", "J"),
    "card_history": ("History of the highlighted card: use and holders", "H · needs gputop record"),
    "card_health": ("Health of the highlighted card: counters and Xid events", "e"),
    "app.process_history": ("History of the highlighted process", "H in the processes"),
    "signal_process('SIGTERM')": ("Terminate the highlighted process (SIGTERM)", "t · yours only"),
    "signal_process('SIGKILL')": ("Kill the highlighted process (SIGKILL)", "T · yours only"),
    "redraw": ("Redraw the whole screen", "ctrl+l"),
    "suspend_process": ("Suspend to the shell (fg resumes)", "ctrl+z"),
    "open_detail": ("Details of the highlighted process", "enter in the processes"),
    "toggle_ranks": ("Collapse or expand a distributed job's ranks", "r in the processes"),
    "show_log": ("Log of the highlighted job", "enter in the jobs"),
    "stop_job": ("Stop the highlighted job (SIGTERM, then SIGKILL)", "K in the jobs"),
    "jump_host(1)": ("Next host", "g · gputop --hosts"),
    "jump_host(-1)": ("Previous host", "G · gputop --hosts"),
    "collapse_host": ("Collapse or expand the highlighted host", "c · gputop --hosts"),
    "collapse_all": ("Collapse or expand every host", "C · gputop --hosts"),
    "filter_host": ("Filter processes to the highlighted host (again: all)", "h"),
}
"""Action → (title, help). The title is what the palette searches."""


def bindings_of(node: DOMNode) -> Iterator[Binding]:
    """The bindings declared by ``node``'s class and its bases (class attributes)."""
    for cls in type(node).__mro__:
        for binding in cls.__dict__.get("BINDINGS", ()):
            if isinstance(binding, Binding):
                yield binding


def palette_commands(app: App[Any], screen: Screen[object]) -> Iterator[SystemCommand]:
    """A command for every action bound on the app or a widget of ``screen``."""
    seen: set[str] = set()
    for node in (app, *screen.query("*")):
        for binding in bindings_of(node):
            action = binding.action
            if action in NAVIGATION or action in seen or action not in ACTIONS:
                continue
            seen.add(action)
            title, help_text = ACTIONS[action]
            yield SystemCommand(title, help_text, partial(app.run_action, action, node))
