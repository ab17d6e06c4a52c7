"""Errors that reach a person.

Every exception here carries a message written for the user of gputop, not for its
developers. The CLI prints ``str(error)`` and exits with ``error.exit_code``; the dashboard
shows it in a notification or dialog. Nothing outside this tree should reach a user.
"""

from __future__ import annotations


class GputopError(Exception):
    """Base of every error gputop reports to a person."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(GputopError):
    """The command line asked for something that cannot be done as written."""

    exit_code = 2


class NvmlUnavailableError(GputopError):
    """NVML could not be started: no driver, a broken one, or a version mismatch."""

    exit_code = 2


class ScenarioError(GputopError):
    """A scenario file for simulated GPUs is missing or malformed.

    ``path`` names the file and ``field`` the JSON location (``gpus[2].uuid``) so the
    message points at the exact thing to fix.
    """

    exit_code = 2

    def __init__(self, path: str, problem: str, field: str | None = None) -> None:
        where = f"{path}: {field}: " if field else f"{path}: "
        super().__init__(f"Bad scenario {where}{problem}")
        self.path = path
        self.field = field
        self.problem = problem


class DashboardStopped(GputopError):
    """The dashboard stopped on an error it could not recover from (a bug in gputop).

    The terminal has been restored; the message names the error in one line.
    """

    exit_code = 70
