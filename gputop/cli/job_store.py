"""The user's job store as the commands open it: what it has to tell a person goes to
stderr. ``gputop jobs``, ``jobs wait``, ``run`` and ``run --slurm`` all open it here."""

from __future__ import annotations

import sys

from gputop.core.errors import GputopError
from gputop.core.jobs.store import JobStore, default_state_dir
from gputop.core.private_files import STATE_DIR_ENV, StoreError
from gputop.core.safe_text import clean
from gputop.core.write_faults import WriteFault


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


def open_store_to_record(done: str, again: str) -> JobStore:
    """The store for a command that records a job (``run``, ``run --slurm``), or a
    GputopError that says why nothing was ``done`` ("launched"): a disk found full, or
    read-only, is no damaged store (it is as it was, nothing in it lost); only a store
    moved aside "had to be repaired", and the same command ``again`` uses the new one."""
    try:
        store = open_store()
    except StoreError as error:
        if error.fault is not WriteFault.FULL:
            raise
        raise GputopError(_full(done, str(default_state_dir()))) from None
    fault = store.faults.fault  # the disk found full or read-only, the store opened or not
    refusal = None
    if fault is WriteFault.FULL:
        refusal = _full(done, str(store.state_dir))
    elif fault is not None or not store.writable:
        refusal = (
            f"Nothing was {done}: the job store cannot be written (see above). Free some "
            f"space, or set {STATE_DIR_ENV} to a directory on another file system."
        )
    elif store.notices:  # a person should see that their jobs list was reset first
        refusal = (
            f"Nothing was {done}: the job store had to be repaired (see above). Run the "
            f"same command again to {again} with the new store."
        )
    if refusal is not None:
        store.close()
        raise GputopError(refusal)
    return store


def _full(done: str, where: str) -> str:
    return (
        f"Nothing was {done}: the disk holding the job store is full ({clean(where)}); "
        "nothing in it was lost, and running jobs go on. Free some space, or set "
        f"{STATE_DIR_ENV} to a directory on another file system."
    )
