"""What a reader checks before it opens a history store, its own or another user's (a shared
store an admin records: ``gputop record --readable-by``; docs/history.md, "A shared store",
lists what is refused: links, files or directories others may write, foreign companions).

A reader only reads, so a store of root's or another user's is fine as long as nobody but
its owner could have changed it. The checks are by path just before SQLite opens it:
whoever could swap something in between must be able to write the directory, which only
its owner can. SQLite itself opens the files with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from gputop.core.errors import GputopError
from gputop.core.private_files import owner_name
from gputop.core.sqlite_files import os_cause

WRITABLE_BY_OTHERS = 0o022
"""Group or others may write: the recorder never leaves a store like this."""


class UnsafeStore(GputopError):
    """The store is not read: the message names the path and why."""


def check_for_reading(path: Path, companions: Sequence[str]) -> os.stat_result:
    """The store's own ``lstat``; raises ``UnsafeStore`` (with a person's message) unless
    ``path`` may be read."""
    info = _lstat(
        path, missing=f"No history store at {path}: start 'gputop record' (or give --db PATH)."
    )
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise UnsafeStore(
            f"The history store {path} is not a regular file (a link or something else): "
            "gputop reads only a store file itself, never through a link."
        )
    directory = path.parent
    dir_info = _lstat(directory, missing=f"No history store at {path}.")
    if stat.S_ISLNK(dir_info.st_mode) or not stat.S_ISDIR(dir_info.st_mode):
        raise UnsafeStore(
            f"The history store's directory {directory} is a link or not a directory: gputop "
            "reads a store only from its real directory; give that path instead."
        )
    _refuse_writable(path, info, "history store")
    _refuse_writable(directory, dir_info, "history store's directory")
    if dir_info.st_uid not in (info.st_uid, 0):
        raise UnsafeStore(
            f"The history store {path} (of {owner_name(info.st_uid)}) is in a directory of "
            f"{owner_name(dir_info.st_uid)}, who could replace it: gputop will not read it."
        )
    for suffix in companions:
        _check_companion(Path(f"{path}{suffix}"), info.st_uid)
    try:
        parent = os.stat(directory.parent)
    except OSError:
        return info
    if parent.st_mode & stat.S_IWOTH and not parent.st_mode & stat.S_ISVTX:
        raise UnsafeStore(
            f"The history store {path} is in {directory}, inside {directory.parent}, which "
            "every user may write (without the sticky bit /tmp has): anyone could replace "
            "the store, so gputop will not read it."
        )
    return info


def _lstat(path: Path, missing: str) -> os.stat_result:
    try:
        return os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        raise UnsafeStore(missing) from None
    except OSError as error:
        raise UnsafeStore(f"Cannot open the history store {path}: {os_cause(error)}.") from None


def _refuse_writable(path: Path, info: os.stat_result, what: str) -> None:
    mode = stat.S_IMODE(info.st_mode)
    if mode & WRITABLE_BY_OTHERS:
        raise UnsafeStore(
            f"The {what} {path} is writable by other users than its owner (mode {mode:04o}): "
            "anyone could have changed what it says, so gputop will not read it. Its owner "
            f"can fix it (chmod go-w {path})."
        )


def _check_companion(path: Path, owner: int) -> None:
    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as error:
        raise UnsafeStore(f"Cannot check {path}: {os_cause(error)}.") from None
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeStore(
            f"The history store file {path} is a link or not a regular file: gputop will "
            "not read the store through it."
        )
    if info.st_uid != owner:
        raise UnsafeStore(
            f"The history store file {path} belongs to {owner_name(info.st_uid)}, not to the "
            f"store's owner ({owner_name(owner)}): gputop will not read the store."
        )
    _refuse_writable(path, info, "history store file")
