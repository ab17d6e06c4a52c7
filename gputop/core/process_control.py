"""Signal a GPU process, safely: only the user's own, and only the process that was shown.

Between the moment a person sees a row and the moment they confirm, the process may have
ended and its pid been reused by someone else's. The signal is therefore sent only if the
pid still has the start time the row showed and belongs to the current user.
"""

from __future__ import annotations

import os
import signal

import psutil

from gputop.core.errors import GputopError


class SignalRefused(GputopError):
    """The process may not or cannot be signalled; the message says why."""


def signal_own_process(pid: int, start_time: float | None, signum: signal.Signals) -> None:
    """Send ``signum`` to ``pid`` if it is still the same process and the user's own."""
    try:
        process = psutil.Process(pid)
        uids = process.uids()
        created = process.create_time()
    except psutil.NoSuchProcess:
        raise SignalRefused(f"Process {pid} has already ended.") from None
    except psutil.AccessDenied:
        raise SignalRefused(
            f"Process {pid} belongs to another user; gputop will not signal it."
        ) from None
    if start_time is not None and abs(created - start_time) > 1.0:
        raise SignalRefused(
            f"Process {pid} has ended and its pid now belongs to another process; nothing sent."
        )
    if uids.real != os.getuid():
        raise SignalRefused(f"Process {pid} belongs to another user; gputop will not signal it.")
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        raise SignalRefused(f"Process {pid} has already ended.") from None
    except PermissionError:
        raise SignalRefused(f"No permission to signal process {pid}.") from None
