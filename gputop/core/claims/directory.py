"""Where claims live: one directory every user shares, owned by root, sticky (docs/claims.md).

``settings.CLAIMS_DIR``, default ``/var/lib/gputop/claims``. The directory and every directory
above it must be root's and not rewritable by another user: writable by others only with the
sticky bit, as /tmp is, so that a user can create files there and remove only their own. A
missing directory means claims are not set up on this machine (gputop works as without them);
an unsafe one is refused with the command an administrator runs to make it right.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
from collections.abc import Mapping

from gputop.core import settings
from gputop.core.errors import GputopError
from gputop.core.records import frozen
from gputop.core.safe_text import clean

DIR_MODE = 0o1777


class UnsafeClaimsDir(GputopError):
    """The claims directory exists but another user could rewrite it: it is not used."""

    exit_code = 1


def claims_path(environ: Mapping[str, str] | None = None) -> str:
    """The claims directory this gputop uses (absolute, as given)."""
    return os.path.abspath(settings.CLAIMS_DIR.read(environ).strip())


def setup_line(path: str) -> str:
    """The one command an administrator runs to make the directory (its path quoted for a
    shell and cleaned: a space in it made the line to copy name two directories)."""
    shown = clean(shlex.quote(path))
    return f"sudo gputop claims --setup  (or: sudo install -d -m 1777 -o root -g root {shown})"


@frozen(slots=False)
class OpenDir:
    """The checked directory, held open: every later operation is relative to ``fd``."""

    path: str
    fd: int
    writable: bool
    """Others may create files here (mode 1777): claims can be made, not only read."""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def open_claims_dir(path: str) -> OpenDir | None:
    """The directory, checked and open; None where it does not exist (claims not set up).

    Raises UnsafeClaimsDir where it, or a directory above it, is not root's, is rewritable by
    another user (writable by group or others without the sticky bit), or is a symbolic link.
    """
    try:
        seen = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UnsafeClaimsDir(
            f"The claims directory {path} cannot be read ({error.strerror}); claims are not "
            f"used. An administrator can make it with: {setup_line(path)}"
        ) from None
    problem = _unsafe(seen, path, itself=True)
    parent = os.path.dirname(path)
    while problem is None and parent and parent != os.path.dirname(parent):
        try:
            problem = _unsafe(os.stat(parent), parent, itself=False)
        except OSError as error:
            problem = f"{parent} cannot be read ({error.strerror})"
        parent = os.path.dirname(parent)
    if problem is None:
        problem = _unsafe(os.stat("/"), "/", itself=False)
    if problem is not None:
        raise UnsafeClaimsDir(
            f"The claims directory {path} is not safe: {problem}, so another user could "
            f"rewrite or replace other people's claims. Claims are not used until an "
            f"administrator fixes it: {setup_line(path)}"
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:  # not readable by this user (mode 0700), replaced meanwhile
        raise UnsafeClaimsDir(
            f"The claims directory {path} cannot be opened ({error.strerror}); claims are not "
            f"used. An administrator can make it right with: {setup_line(path)}"
        ) from None
    held = os.fstat(fd)
    if (held.st_dev, held.st_ino) != (seen.st_dev, seen.st_ino):
        os.close(fd)
        raise UnsafeClaimsDir(f"The claims directory {path} was replaced while it was checked.")
    writable = bool(held.st_mode & stat.S_IWOTH)
    return OpenDir(path, fd, writable)


def _unsafe(info: os.stat_result, path: str, *, itself: bool) -> str | None:
    if itself and stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory"
    if info.st_uid != 0:
        return f"{path} belongs to uid {info.st_uid}, not root"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        mode = stat.S_IMODE(info.st_mode)
        return f"{path} is writable by other users without the sticky bit (mode {mode:04o})"
    return None


def _already_set_up(path: str) -> bool:
    """The directory is there as ``set_up`` leaves it, and every directory above is sound."""
    try:
        info = os.lstat(path)
        if not (
            stat.S_ISDIR(info.st_mode)
            and (info.st_uid, info.st_gid) == (0, 0)
            and stat.S_IMODE(info.st_mode) == DIR_MODE
        ):
            return False
        opened = open_claims_dir(path)
    except (OSError, UnsafeClaimsDir):
        return False
    if opened is None:
        return False
    opened.close()
    return True


def set_up(path: str) -> str:
    """``gputop claims --setup`` (as root): make the directory root's, mode 1777; say what
    was done. Directories above it that do not exist are made 0755."""
    if os.geteuid() != 0:
        raise GputopError(f"Only root can set up the claims directory; run: {setup_line(path)}")
    if _already_set_up(path):
        return f"The claims directory {path} is already set up (root's, mode 1777): nothing to fix."
    try:
        return _set_up(path)
    except OSError as error:
        raise GputopError(f"Cannot set up the claims directory {path}: {error.strerror}.") from None


def _set_up(path: str) -> str:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
        made = True
    except FileExistsError:
        made = False
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise GputopError(f"{path} exists and is not a directory; remove it first.")
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, 0, 0)
        os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)
    open_claims_dir(path)  # the directories above it are checked too
    return f"{'Made' if made else 'Fixed'} the claims directory {path} (root's, mode 1777)."
