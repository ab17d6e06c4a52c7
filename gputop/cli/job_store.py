"""The user's job store as the commands open it: what it has to tell a person goes to
stderr. ``gputop jobs``, ``jobs wait``, ``run`` and ``run --slurm`` all open it here."""

from __future__ import annotations

import sys

from gputop.core.jobs.store import JobStore
from gputop.core.safe_text import clean


def open_store(create: bool = True) -> JobStore:
    """The user's job store; what it has to tell a person goes to stderr.

    ``create=False`` (commands that only read or stop): where no store was ever created,
    an empty one in memory, so that nothing is written on disk; a store that reads as
    damaged is refused, never moved aside. ``create=True`` (commands that record jobs):
    one that an integrity check proves damaged is moved aside, what it holds kept.
    """
    store = JobStore.open(repair=True) if create else JobStore.open_existing()
    if store is None:
        return JobStore.in_memory_store()
    _say_notices(store)
    return store


def close_store(store: JobStore) -> None:
    """Close it, after saying what came up meanwhile (a disk found full, once)."""
    _say_notices(store)
    store.close()


def _say_notices(store: JobStore) -> None:
    for notice in store.take_notices():
        print(f"gputop: notice: {clean(notice)}", file=sys.stderr)
