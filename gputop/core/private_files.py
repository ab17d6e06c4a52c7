"""The state directory and its files: the user's own and private, or refused by name.

gputop's state directory may sit on a path another user can guess or create first
(``settings.STATE_DIR`` set to ``/tmp/...``, a shared ``XDG_STATE_HOME``). Anything found there is
therefore checked before it is used, and refused with a message naming the path when it is
not provably ours:

- a directory must be a real directory (not a symbolic link), owned by the user, and not
  writable by group or others; a group- or world-*readable* one of ours is made private;
- a file (database, lock, log, env file) is opened relative to its directory's descriptor
  with ``O_NOFOLLOW`` and created with ``O_EXCL`` when new, so a planted link is never
  followed; it must be a regular file owned by the user with no other hard link;
- permissions are only ever changed through a descriptor of something checked to be ours,
  never through a path (gputop run as root once ``chmod``'ed ``/dev/null`` that way).

One exception, asked for by name: a history store an admin shares (``gputop record
--readable-by all|GROUP``, ``Sharing``) keeps its directory and files readable by everyone or
by one group, and still writable by its owner only (docs/history.md, "A shared store").

See docs/security.md, part two.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from gputop.core import settings
from gputop.core.errors import GputopError
from gputop.core.records import frozen
from gputop.core.write_faults import WriteFault, write_fault_of

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
STATE_DIR_ENV = settings.STATE_DIR.name
JOB_STORE = "job store"
ADVICE = f"set {STATE_DIR_ENV} (or XDG_STATE_HOME) to a directory of your own"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def default_state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``settings.STATE_DIR``, else ``$XDG_STATE_HOME/gputop``, else ``~/.local/state/gputop``."""
    explicit = settings.STATE_DIR.read(environ)
    if explicit:
        return Path(explicit).expanduser()
    xdg = environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore a relative value
        return Path(xdg) / "gputop"
    home = environ.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".local" / "state" / "gputop"


@frozen
class Sharing:
    """Who besides the owner may read a shared store: every user (``group_id`` None: 0755
    and 0644), or the members of one group (0750 and 0640, the group set to it)."""

    group_id: int | None = None
    group_name: str | None = None

    @property
    def dir_mode(self) -> int:
        return 0o755 if self.group_id is None else 0o750

    @property
    def file_mode(self) -> int:
        return 0o644 if self.group_id is None else 0o640


class StoreError(GputopError):
    """The job store cannot be used: the message names the path and the cause.

    ``fault`` is set when the cause is a full or read-only disk (write_faults.py): then
    the store can still be read, and writing works again once space returns.
    """

    def __init__(self, message: str, fault: WriteFault | None = None) -> None:
        super().__init__(message)
        self.fault = fault


class StorePermissionError(StoreError):
    """A file or directory of the store is not accessible: a permission problem, reported
    as such (the store is not damaged and is left exactly as it is)."""


def owner_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def os_cause(error: OSError) -> str:
    """``no space left on device``: the system's words for a message's end."""
    return error.strerror.lower() if error.strerror else str(error)


class NotRegularFile(OSError):
    """A FIFO, a device or a directory where a file was named."""


def read_regular_file(path: str | os.PathLike[str], limit: int) -> tuple[os.stat_result, bytes]:
    """A file the user named (outside the state directory, links followed), its status and
    at most ``limit`` bytes (always bounded: a file may be huge); raises ``OSError``,
    ``NotRegularFile`` when it is not a regular file. Opened without blocking: a FIFO there
    would hang whoever reads it."""
    fd, info = open_regular(path)
    try:
        with open(fd, "rb", closefd=False) as file:
            return info, file.read(limit)
    finally:
        os.close(fd)


@contextlib.contextmanager
def regular_file_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """A file the user named, checked as ``read_regular_file`` checks it, as a path for a
    library that takes only paths (OpenSSL's certificate chain): the ``/proc/self/fd``
    entry of the descriptor checked, so what it opens is that file, never a FIFO."""
    fd = open_regular(path)[0]
    try:
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def open_regular(
    path: str | os.PathLike[str], *, follow_links: bool = True
) -> tuple[int, os.stat_result]:
    """A descriptor reading ``path`` (the caller closes it) and its status; ``OSError``,
    ``NotRegularFile`` when it is not a regular file (opened without blocking first)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    fd = os.open(path, flags if follow_links else flags | os.O_NOFOLLOW)
    try:  # checked before a file object is made: os.fdopen refuses a directory's
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _refuse_symlink(path: Path, what: str) -> StoreError:
    return StoreError(
        f"The {what} {path} is a symbolic link: gputop never follows links in its state "
        f"directory, so it left the link and what it points to untouched. Remove the link "
        f"(rm {path}), or {ADVICE}."
    )


def _not_a_directory(path: Path, store: str) -> StoreError:
    return StoreError(f"Cannot use {path} for the {store}: it is not a directory; {ADVICE}.")


def _check_dir(fd: int, path: Path, store: str = JOB_STORE, sharing: Sharing | None = None) -> None:
    """Owned by us and not writable by anyone else; readable by others: made private
    (shared as ``sharing`` says, where given)."""
    info = os.fstat(fd)
    if not stat.S_ISDIR(info.st_mode):
        raise _not_a_directory(path, store)
    if info.st_uid != os.geteuid():
        raise StoreError(
            f"The {store} directory {path} belongs to {owner_name(info.st_uid)}, not to "
            f"you ({owner_name(os.geteuid())}): another user may have created it to read or "
            f"change your jobs, so gputop will not use it; {ADVICE}."
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise StoreError(
            f"The {store} directory {path} is writable by other users (mode {mode:04o}): "
            f"they could plant files in it, so gputop will not use it. Make it private "
            f"(chmod 700 {path}) and check what is in it, or {ADVICE}."
        )
    _keep_private(fd, path, info, sharing, mode & PRIVATE_DIR_MODE)
    if mode & PRIVATE_DIR_MODE != PRIVATE_DIR_MODE and os.geteuid() != 0:
        raise StorePermissionError(
            f"The {store} directory {path} is not readable and writable by you (mode "
            f"{mode:04o}): fix it with chmod 700 {path}, or {ADVICE}."
        )


def open_private_dir(
    path: Path, *, create: bool = True, store: str = JOB_STORE, sharing: Sharing | None = None
) -> int:
    """An ``O_DIRECTORY`` descriptor of ``path`` (an absolute path), created 0700 if
    missing, after the ownership and permission checks. The caller closes it. ``store``
    ("history store") names what the directory holds in errors; ``sharing``: a shared
    store's directory, readable by others."""
    if create:
        try:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except FileExistsError:  # a file where a parent directory should be
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)) from None
            _check_parent(path, store)
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, PRIVATE_DIR_MODE)
        except OSError as error:
            refused = StorePermissionError if isinstance(error, PermissionError) else StoreError
            raise refused(
                f"Cannot create the {store} directory {path}: {os_cause(error)}; {ADVICE}.",
                write_fault_of(error),  # never for a permission problem
            ) from None
    else:
        _check_parent(path, store)
    return _open_dir(lambda: os.open(path, _DIR_FLAGS), path, store, sharing)


def _check_parent(path: Path, store: str) -> None:
    """Whoever may write the parent may rename the state directory away and put their own
    in its place, unless the parent is sticky like /tmp (then only the owner may): its
    owner always may, so it is ours or root's."""
    try:
        info = os.stat(path.parent)
    except OSError:
        return  # the directory itself cannot be opened either; that error says why
    if info.st_uid not in (os.geteuid(), 0):  # its owner may rename anything in it
        raise StoreError(
            f"The {store} directory {path} is in {path.parent}, which belongs to another user "
            f"(uid {info.st_uid}): they could replace the store, so gputop will not use it; "
            f"{ADVICE}."
        )
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise StoreError(
            f"The {store} directory {path} is in {path.parent}, which every user may write "
            f"(mode {stat.S_IMODE(info.st_mode):04o}, without the sticky bit /tmp has): anyone "
            f"could replace the store, so gputop will not use it; {ADVICE}."
        )


def open_private_subdir(parent_fd: int, parent: Path, name: str) -> int:
    """``parent/name`` as a checked private directory, reached through ``parent_fd``."""
    path = parent / name
    try:
        os.mkdir(name, PRIVATE_DIR_MODE, dir_fd=parent_fd)
    except FileExistsError:
        pass
    except OSError as error:
        raise StoreError(
            f"Cannot create the directory {path}: {os_cause(error)}.", write_fault_of(error)
        ) from None
    return _open_dir(lambda: os.open(name, _DIR_FLAGS, dir_fd=parent_fd), path)


def _open_dir(
    opener: Callable[[], int], path: Path, store: str = JOB_STORE, sharing: Sharing | None = None
) -> int:
    try:
        fd = opener()
    except OSError as error:
        if error.errno == errno.ELOOP or os.path.islink(path):
            raise _refuse_symlink(path, f"{store} directory") from None
        if error.errno == errno.ENOTDIR:
            raise _not_a_directory(path, store) from None
        if error.errno == errno.EACCES:
            raise StorePermissionError(
                f"Cannot open the {store} directory {path}: {os_cause(error)}; {ADVICE}."
            ) from None
        raise StoreError(f"Cannot open the {store} directory {path}: {os_cause(error)}.") from None
    try:
        _check_dir(fd, path, store, sharing)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_private_file(
    dir_fd: int,
    directory: Path,
    name: str,
    flags: int,
    what: str,
    *,
    create: bool = True,
) -> int:
    """``directory/name`` opened with ``flags`` through ``dir_fd``, never through a link.

    A new file is created exclusively (0600); an existing one must be a regular file of
    ours with a single link. ``what`` ("job log") names it in errors.
    """
    path = directory / name
    base = flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a planted FIFO
    fd = -1
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                fd = os.open(name, base | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE, dir_fd=dir_fd)
        if fd < 0:
            fd = os.open(name, base, dir_fd=dir_fd)
    except OSError as error:
        raise _open_error(error, path, what) from None
    try:
        _check_file(fd, path, what)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_file(fd: int, path: Path, what: str, sharing: Sharing | None = None) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(
            f"The {what} {path} is not a regular file: gputop left it untouched. Remove it, "
            f"or {ADVICE}."
        )
    if info.st_uid != os.geteuid():
        raise StoreError(
            f"The {what} {path} belongs to {owner_name(info.st_uid)}, not to you: another "
            f"user may have planted it, so gputop will not use it. Remove it, or {ADVICE}."
        )
    if info.st_nlink > 1:
        raise StoreError(
            f"The {what} {path} has {info.st_nlink} hard links: it may be another file of "
            f"yours under a second name, so gputop will not write to it. Remove it, or "
            f"{ADVICE}."
        )
    _keep_private(fd, path, info, sharing, PRIVATE_FILE_MODE)


def _by_fd(fd: int, change: Callable[[int | str], None]) -> None:
    """``change`` (``os.chmod``, ``os.chown``) on a descriptor, also an ``O_PATH`` one (which
    ``fchmod`` refuses): through its ``/proc/self/fd`` entry, the very inode it holds."""
    try:
        change(fd)
    except OSError as error:
        if error.errno != errno.EBADF:
            raise
        change(f"/proc/self/fd/{fd}")


def _keep_private(
    fd: int, path: Path, info: os.stat_result, sharing: Sharing | None, private_mode: int
) -> None:
    """Something of ours (checked), reached without following a link: shared as ``sharing``
    says, else made private where others may read it. On a read-only file system it cannot
    change, and nobody can plant anything there either."""
    if sharing is None:
        if stat.S_IMODE(info.st_mode) & 0o077:
            try:
                _by_fd(fd, lambda f: os.chmod(f, private_mode))
            except OSError as error:
                if error.errno != errno.EROFS:
                    raise
        return
    mode = sharing.file_mode if stat.S_ISREG(info.st_mode) else sharing.dir_mode
    try:
        if sharing.group_id is not None and info.st_gid != sharing.group_id:
            group_id = sharing.group_id
            _by_fd(fd, lambda f: os.chown(f, -1, group_id))
        if stat.S_IMODE(info.st_mode) != mode:
            _by_fd(fd, lambda f: os.chmod(f, mode))
    except OSError as error:
        if error.errno == errno.EROFS:
            return
        group = f" to the group {sharing.group_name}" if sharing.group_name else ""
        raise StorePermissionError(
            f"Cannot share {path}{group} (mode {mode:04o}): {os_cause(error)}"
            + (" (you must be a member of that group)" if group else "")
            + "."
        ) from None


def check_store_file(
    dir_fd: int,
    directory: Path,
    name: str,
    what: str,
    *,
    create: bool,
    sharing: Sharing | None = None,
) -> bool:
    """Create (``create``: 0600, exclusively) or check one of a SQLite store's files
    without ever opening it for reading or writing; True when it exists now.

    POSIX locks belong to a process and an inode, and closing *any* ordinary descriptor
    of a file drops every lock the process holds on it, SQLite's included: a check that
    opened and closed the store while another connection of this process read it took
    that reader's locks away (docs/sqlite.md). So an existing file is looked at through an
    ``O_PATH`` descriptor, whose close drops no lock, and a new one is created exclusively:
    a new inode, on which this process holds nothing. The checks are those of
    ``open_private_file``: never through a link, a regular file of ours with one link.
    """
    path = directory / name
    if create:
        try:
            fd = os.open(name, os.O_RDWR | _NEW_FILE, PRIVATE_FILE_MODE, dir_fd=dir_fd)
        except FileExistsError:
            pass
        except OSError as error:
            raise _open_error(error, path, what) from None
        else:
            try:
                _check_file(fd, path, what, sharing)
            finally:
                os.close(fd)
            return True
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        if create:  # removed between the exclusive create and this look: try once more
            return check_store_file(dir_fd, directory, name, what, create=False, sharing=sharing)
        return False
    except OSError as error:
        raise _open_error(error, path, what) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISLNK(info.st_mode):
            raise _refuse_symlink(path, what)
        _check_file(fd, path, what, sharing)
        _check_access(info, write=create)
    except OSError as error:
        raise _open_error(error, path, what) from None
    finally:
        os.close(fd)  # an O_PATH descriptor: its close drops no lock
    return True


def _check_access(info: os.stat_result, *, write: bool) -> None:
    """What opening it would have refused: a file of ours (checked) whose owner bits deny
    reading (or writing) is a permission problem, never damage. Root is not refused."""
    if os.geteuid() == 0:
        return
    needed = stat.S_IRUSR | (stat.S_IWUSR if write else 0)
    if info.st_mode & needed != needed:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))


def _open_error(error: OSError, path: Path, what: str) -> StoreError:
    if error.errno == errno.ELOOP:
        return _refuse_symlink(path, what)
    if error.errno in (errno.EACCES, errno.EPERM):
        return StorePermissionError(
            f"Cannot open the {what} {path}: {os_cause(error)}. It was left as it is (it is "
            f"not damaged): give it back to yourself and make it private (chmod 600 "
            f"{path}), or {ADVICE}."
        )
    return StoreError(f"Cannot open the {what} {path}: {os_cause(error)}.", write_fault_of(error))


@contextlib.contextmanager
def private_dir_fd(path: Path) -> Iterator[int]:
    fd = open_private_dir(path)
    try:
        yield fd
    finally:
        os.close(fd)


def open_log_append(log_path: str | os.PathLike[str]) -> int:
    """A descriptor appending to a job's log; the log and its directory are checked.

    Raises ``StoreError`` (an ``OSError`` subclass is not enough: the supervisor must be
    able to tell a refused log from a full disk).
    """
    return open_checked_file(log_path, os.O_WRONLY | os.O_APPEND, "job log")


def open_checked_file(
    file_path: str | os.PathLike[str], flags: int, what: str, *, create: bool = True
) -> int:
    """``open_private_file`` of a file named by its path, its directory checked first."""
    path = Path(file_path)
    dir_fd = _open_parent(path)
    try:
        return open_private_file(dir_fd, path.parent, path.name, flags, what, create=create)
    finally:
        os.close(dir_fd)


def _open_parent(path: Path) -> int:
    """The checked directory of a file named by its path (a job's log, an env file)."""
    return _open_dir(lambda: os.open(path.parent, _DIR_FLAGS), path.parent)


def append_to_log(log_path: str | os.PathLike[str], data: bytes) -> bool:
    """Append ``data`` to a checked log; False (nothing written) when it is refused."""
    try:
        fd = open_log_append(log_path)
    except (StoreError, OSError):
        return False
    try:
        os.write(fd, data)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def write_env_file(state_dir: Path, run_dir: str, job_id: int, environ: Mapping[str, str]) -> str:
    """Hand the launcher's environment to a tmux-mode supervisor in a private new file."""
    name = f"{job_id}.env.json"
    with private_dir_fd(state_dir) as state_fd:
        run_fd = open_private_subdir(state_fd, state_dir, run_dir)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=run_fd)  # a stale one of ours: never reused
        try:
            fd = os.open(name, os.O_WRONLY | _NEW_FILE, PRIVATE_FILE_MODE, dir_fd=run_fd)
        except OSError as error:
            raise StoreError(
                f"Cannot create {state_dir / run_dir / name}: {os_cause(error)}."
            ) from None
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(_env_record(environ), handle, allow_nan=False)
    finally:
        os.close(run_fd)
    return str(state_dir / run_dir / name)


def read_env_file(env_file: str) -> dict[str, str] | None:
    """The environment a launcher left, read once and deleted; ``None`` if refused."""
    path = Path(env_file)
    try:
        dir_fd = _open_parent(path)
    except StoreError:
        return None
    try:
        try:
            fd = open_private_file(
                dir_fd, path.parent, path.name, os.O_RDONLY, "env file", create=False
            )
        except StoreError:
            return None
        with os.fdopen(fd, encoding="utf-8") as handle:
            data = json.load(handle)
        return _env_from_record(data)
    except (OSError, ValueError, RecursionError):  # nested too deeply: no environment
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path.name, dir_fd=dir_fd)
        os.close(dir_fd)


ENV_BYTES_KEY = ""
"""In an env file, the variables whose name or value is not UTF-8, as hex of their bytes:
no variable has an empty name, and the file stays strict JSON (no lone surrogate)."""


def _env_record(environ: Mapping[str, str]) -> dict[str, object]:
    record: dict[str, object] = {}
    undecodable: list[list[str]] = []
    for key, value in environ.items():
        try:
            key.encode("utf-8")
            value.encode("utf-8")
        except UnicodeEncodeError:
            undecodable.append([os.fsencode(key).hex(), os.fsencode(value).hex()])
        else:
            record[key] = value
    if undecodable:
        record[ENV_BYTES_KEY] = undecodable
    return record


def _env_from_record(data: object) -> dict[str, str] | None:
    """The environment an env file holds (``_env_record``); ``None`` if it holds none."""
    if not isinstance(data, dict):
        return None
    undecodable = data.pop(ENV_BYTES_KEY, [])
    environ = {str(key): str(value) for key, value in data.items()}
    if not isinstance(undecodable, list):
        return None
    for pair in undecodable:
        if not (isinstance(pair, list) and len(pair) == 2):
            return None
        if not all(isinstance(part, str) for part in pair):
            return None
        environ[os.fsdecode(bytes.fromhex(pair[0]))] = os.fsdecode(bytes.fromhex(pair[1]))
    return environ
