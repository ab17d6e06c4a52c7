"""ctrl+z in every dashboard (this machine's, the lab's, the fleet's): back to the shell,
whose ``fg`` resumes it, redrawn whole (docs/faults.md, "Suspended, resumed, or its terminal
changed")."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.binding import Binding

from gputop.tui.textual_compat import stop_with_its_job

SUSPEND_BINDING = Binding("ctrl+z", "suspend_process", "Suspend", show=False, priority=True)
"""ctrl+z, with priority: on a screen over the dashboard too (a modal screen hides the app's
keys). Its action calls :func:`suspend_to_shell`."""

NO_JOB_CONTROL = (
    "ctrl+z needs a shell with job control to return to (fg resumes), and none started this "
    "dashboard: q quits."
)


def suspend_to_shell(app: App[Any]) -> None:
    """Stop ``app`` with its whole job, as the terminal's own ctrl+z stops a job (its
    process group). Only where a shell with job control runs it: a stopped process nobody
    resumes would hang there, so elsewhere it says so and runs on."""
    if app.is_headless:
        return
    from gputop.core.process_control import in_a_shell_job

    if not in_a_shell_job():
        app.notify(NO_JOB_CONTROL, timeout=10)
        return
    stop_with_its_job(app)
