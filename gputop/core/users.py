"""Who runs gputop, by the name psutil gives that user's processes.

The free-card policy, the own-process highlight and the lab's host status all compare this
name with a process's user, so there is one answer for all of them.
"""

from __future__ import annotations

import getpass
import os


def current_user() -> str:
    """LOGNAME/USER, else the uid's name; the uid itself where it has no name (some
    containers), as psutil then reports it."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
