"""ctrl+z in every dashboard (this machine's, the lab's, the fleet's): back to the shell,
whose ``fg`` resumes it, redrawn whole (docs/faults.md, "Suspended, resumed, or its terminal
changed")."""

from __future__ import annotations

from typing import Any, cast

from textual.app import App
from textual.binding import Binding

from gputop.tui.textual_compat import stop_with_its_job

SUSPEND_BINDING = Binding("ctrl+z", "suspend_process", "Suspend", show=False, priority=True)
"""ctrl+z, with priority: on a screen over the dashboard too (a modal screen hides the app's
keys). Its action: ``SuspendsToShell``'s."""

NO_JOB_CONTROL = (
    "ctrl+z needs a shell with job control to return to (fg resumes), and none started this "
    "dashboard: q quits."
)


class SuspendsToShell:
    """Mix in before ``App``: ctrl+z stops the app with its whole job, as the terminal's own
    ctrl+z stops a job (its process group). Only where a shell with job control runs it: a
    stopped process nobody resumes would hang there, so elsewhere it says so and runs on."""

    def action_suspend_process(self) -> None:
        app = cast("App[Any]", self)
        if app.is_headless:
            return
        from gputop.core.process_control import in_a_shell_job

        if not in_a_shell_job():
            app.notify(NO_JOB_CONTROL, timeout=10)
            return
        stop_with_its_job(app)
