"""The help screen (``?``) and the bindings name the same keys, both ways."""

from __future__ import annotations

import re

from textual.app import App
from textual.binding import Binding
from textual.screen import Screen

from gputop.tui.app import GputopApp
from gputop.tui.keys import KEY_HELP
from gputop.tui.lab.lab_app import LabApp
from gputop.tui.lab.lab_grid import LabGrid
from gputop.tui.lab.lab_jobs import LabJobsPanel
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.jobs_panel import JobsPanel
from gputop.tui.widgets.process_table import ProcessTable

DASHBOARD = (GputopApp, GpuGrid, ProcessTable, JobsPanel, LabApp, LabGrid, LabJobsPanel)
"""The one-host dashboard and the dashboard across hosts (``gputop --hosts``)."""
SHOWN_AS = {
    "left": "←",
    "right": "→",
    "up": "↑",
    "down": "↓",
    "pageup": "pgup",
    "pagedown": "pgdn",
    "question_mark": "?",
    "slash": "/",
}
# Second names of a key the help already lists under its first name.
ALIASES = {"ctrl+home", "ctrl+end"}


def _keys(binding: Binding | tuple[str, ...]) -> list[str]:
    key = binding.key if isinstance(binding, Binding) else binding[0]
    return [SHOWN_AS.get(k.strip(), k.strip()) for k in key.split(",")]


def _own_keys(cls: type) -> set[str]:
    return {k for b in cls.__dict__.get("BINDINGS", []) for k in _keys(b)}


def _every_bound_key() -> set[str]:
    """The dashboard's keys with those its classes inherit, the screen's and the palette's."""
    found = {k for cls in DASHBOARD for base in cls.__mro__ for k in _own_keys(base)}
    return found | _own_keys(Screen) | {App.COMMAND_PALETTE_BINDING}


def _help_keys() -> set[str]:
    """Keys as the help lists them; "/" separates keys ("s / S"), but a row of "/" alone
    is the slash key."""
    return {
        key
        for _, rows in KEY_HELP
        for keys, _ in rows
        for key in ([keys] if keys == "/" else re.split(r"[\s/]+", keys))
        if key
    }


def test_every_key_bound_on_the_dashboard_is_in_the_help() -> None:
    bound = {k for cls in DASHBOARD for k in _own_keys(cls)} - ALIASES
    assert sorted(bound - _help_keys()) == []


def test_every_key_in_the_help_is_bound() -> None:
    assert sorted(_help_keys() - _every_bound_key()) == []
