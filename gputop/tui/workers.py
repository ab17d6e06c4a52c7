"""One policy for the dashboard's background work: a failing worker never ends the app.

Every ``@work`` of the dashboard is declared ``exit_on_error=False`` (Textual's default
would close the whole app on the first exception in a thread), and every node that starts
workers mixes in :class:`ReportsWorkerFailures`, so a failure is said once, in one
notification naming what failed, and the dashboard goes on. See docs/security.md.
"""

from __future__ import annotations

from textual.worker import Worker, WorkerState

from gputop.core.safe_text import clean

WHAT_FAILED = {
    "sampler": "Sampling the GPUs",
    "jobs": "Reading gputop's jobs",
    "jobs-stop": "Stopping the job",
    "probes": "The CUDA and torch check",
    "history": "Reading the command history",
    "launch": "The launch",
    "log": "Reading the job's log",
}


def failure_message(worker: Worker[object]) -> str:
    """``Reading the job's log failed (ValueError: ...); the dashboard goes on.``"""
    what = WHAT_FAILED.get(worker.group, f"Background work '{clean(worker.group)}'")
    error = worker.error
    detail = "" if error is None else f" ({type(error).__name__}: {clean(str(error))})"
    return f"{what} failed{detail}; the dashboard goes on."


class ReportsWorkerFailures:
    """Mix into every widget, screen or app that starts workers (before the Textual class)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR:
            report = getattr(getattr(self, "app", None), "report_worker_failure", None)
            if report is not None:
                report(event.worker)
