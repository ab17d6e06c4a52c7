"""One claim file: its name, its content, and what makes it believable (docs/claims.md).

``<card>.<uid>.<kind><nonce>.claim``: the card's UUID (``/`` of an old MIG UUID written
``_``), the claimer's uid, ``c`` for a claim a person made or ``j`` for one a gputop job
holds, and a random nonce so that nobody can take a name another user will need. The
content is JSON padded to a fixed size (an extension rewrites it in place, in one write).

What the kernel says wins over what the file says: the owner is the file's ``st_uid``, and
a file whose name or content names another uid, user or card, or an end further from its
inode change time than any claim may last, is no claim (and shown to root as suspicious).
The order between claims is the file's birth time (``statx``), which no user can move: not
a rewrite, not a hard link (which moves the change time).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import pwd
import re
import secrets
import stat
import struct
import sys
from typing import Any, NamedTuple

from gputop.core.numbers import LATEST_TIME_S, valid_text, whole_within, within
from gputop.core.records import frozen
from gputop.core.safe_text import clean

SUFFIX = ".claim"
CONTENT_BYTES = 1024
"""Every claim file is exactly this long: JSON, then spaces."""
MAX_FOR_S = 7 * 86400.0
"""The longest a claim may last from its last write."""
MIN_FOR_S = 60.0
DEFAULT_FOR_S = 4 * 3600.0
CLOCK_SLACK_S = 5.0
"""How far a written time may lead the file's change time (both read the same clock)."""
MAX_NOTE = 200
UNREADABLE = "not a claim (unreadable content)"
UNDECODABLE = "not a claim (its content cannot be decoded: {})"
MAX_GPU_INDEX = 4096
MAX_JOB_ID = 2**53
_NAME = re.compile(r"([A-Za-z0-9_-]{1,96})\.([0-9]{1,10})\.([cj])([0-9a-f]{16})\.claim")


@frozen(slots=False)
class Claim:
    """A live, believable claim: one user's hold on one card until ``until``."""

    name: str
    uuid: str
    gpu: int
    """The card's physical index when it was claimed (for a person; the UUID is the card)."""
    uid: int
    user: str
    until: float
    note: str
    job: int | None
    ctime_ns: int
    """The inode's change time (its last write: an extension moves it, so does a link)."""
    place_ns: int = 0
    """The file's birth time where the file system keeps one (else its change time): the
    order between claims, which no user can move."""
    ino: int = 0
    place_fixed: bool = False
    """The place is the birth time (else the change time, which a rewrite moves)."""

    @property
    def order(self) -> tuple[int, str]:
        return (self.place_ns or self.ctime_ns, self.name)

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in ("gpu", "uuid", "user", "until", "note", "job")}


@frozen(slots=False)
class Suspicious:
    """A file in the claims directory that is not a believable claim, and why."""

    name: str
    uid: int | None
    reason: str

    def text(self) -> str:
        owner = user_name(self.uid) if self.uid is not None else "?"
        return f"{clean(self.name[:120])} (owner {clean(owner)}): {self.reason}"


@frozen(slots=False)
class ParsedName:
    uuid: str
    uid: int
    job_kind: bool


def user_name(uid: int) -> str:
    """The uid's login name, or the uid itself where it has none (as psutil reports it)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)


def parse_name(name: str) -> ParsedName | None:
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return ParsedName(match.group(1).replace("_", "/"), int(match.group(2)), match.group(3) == "j")


def new_name(uuid: str, uid: int, job: bool) -> str:
    return f"{uuid.replace('/', '_')}.{uid}.{'j' if job else 'c'}{secrets.token_hex(8)}{SUFFIX}"


def card_key(uuid: str) -> str:
    """The card as a name holds it (``/`` of old MIG UUIDs as ``_``): how claims are compared."""
    return uuid.replace("_", "/")


def content(
    uuid: str, gpu: int, uid: int, user: str, until: float, note: str, job: int | None
) -> bytes:
    document = {
        "v": 1,
        "uuid": uuid,
        "gpu": gpu,
        "uid": uid,
        "user": user,
        "until": round(until, 3),
        "note": valid_text(note),  # a job's name may hold bytes that are not UTF-8
        "job": job,
    }
    data = json.dumps(document, ensure_ascii=True, allow_nan=False).encode()
    if len(data) > CONTENT_BYTES:
        raise ValueError("claim too long")
    return data + b" " * (CONTENT_BYTES - len(data))


class FileStat(NamedTuple):
    """What the kernel says of a file: ``os.stat_result``'s names, and its birth time."""

    st_mode: int
    st_uid: int
    st_nlink: int
    st_size: int
    st_ino: int
    st_ctime_ns: int
    birth_ns: int | None
    """None where the file system keeps none (or the system cannot say)."""

    @property
    def place_ns(self) -> int:
        return self.st_ctime_ns if self.birth_ns is None else self.birth_ns


_AT_SYMLINK_NOFOLLOW = 0x100
_AT_EMPTY_PATH = 0x1000
_STATX_BASIC_AND_BTIME = 0x07FF | 0x0800
_STATX_BTIME = 0x0800
_statx: Any = None


def _libc_statx() -> Any:
    global _statx
    if _statx is None:
        _statx = False
        if sys.platform.startswith("linux"):
            try:
                function = ctypes.CDLL(None, use_errno=True).statx
            except (OSError, AttributeError):  # a C library without statx (glibc < 2.28)
                pass
            else:
                function.argtypes = [
                    ctypes.c_int,
                    ctypes.c_char_p,
                    ctypes.c_int,
                    ctypes.c_uint,
                    ctypes.c_void_p,
                ]
                function.restype = ctypes.c_int
                _statx = function
    return _statx


def stat_file(dir_fd: int, name: str | None = None) -> FileStat:
    """The file ``name`` in ``dir_fd`` (not followed if a link), or the open file ``dir_fd``
    itself; OSError where it cannot be. By ``statx`` where the system has it, for the birth
    time ``os.stat`` does not give on Linux."""
    function = _libc_statx()
    if function:
        buffer = ctypes.create_string_buffer(256)
        path = os.fsencode(name) if name is not None else b""
        flags = _AT_SYMLINK_NOFOLLOW if name is not None else _AT_EMPTY_PATH
        if function(dir_fd, path, flags, _STATX_BASIC_AND_BTIME, buffer) == 0:
            mask, nlink, uid, mode = struct.unpack_from("<I12xII4xH", buffer, 0)
            ino, size = struct.unpack_from("<QQ", buffer, 32)
            birth_s, birth_ns = struct.unpack_from("<qI", buffer, 80)
            ctime_s, ctime_ns = struct.unpack_from("<qI", buffer, 96)
            birth = birth_s * 10**9 + birth_ns if mask & _STATX_BTIME else None
            return FileStat(mode, uid, nlink, size, ino, ctime_s * 10**9 + ctime_ns, birth)
        number = ctypes.get_errno()
        if number not in (0, errno.ENOSYS, errno.EPERM):  # EPERM: a seccomp filter
            raise OSError(number, os.strerror(number), name)
    follow = {"dir_fd": dir_fd, "follow_symlinks": False}
    info = os.fstat(dir_fd) if name is None else os.stat(name, **follow)  # type: ignore[arg-type]
    return FileStat(
        info.st_mode, info.st_uid, info.st_nlink, info.st_size, info.st_ino, info.st_ctime_ns, None
    )


def check_file(info: FileStat | os.stat_result, parsed: ParsedName) -> str | None:
    """Why a file's kind, mode or owner makes it no claim; None when they are right. A hard
    link is no reason: anyone may link a file where the kernel lets them, so that would let
    them hide its owner's claim (it is noted, docs/claims.md)."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by other users"
    if info.st_uid != parsed.uid:
        return f"its name says uid {parsed.uid}, but it belongs to uid {info.st_uid}"
    if info.st_size != CONTENT_BYTES:
        return f"{info.st_size} bytes, not {CONTENT_BYTES}"
    return None


def parse_content(data: bytes, name: str, parsed: ParsedName, info: FileStat) -> Claim | str:
    """The claim, or why this content is not believable for this file. Whatever the content
    (nested deeper than a decoder recurses, a number no float holds), the answer is a
    reason, never an exception: the file is the problem, not its reader."""
    try:
        return _parse_content(data, name, parsed, info)
    except Exception as error:  # anything a decoder or a conversion raises
        return UNDECODABLE.format(type(error).__name__)


def _parse_content(data: bytes, name: str, parsed: ParsedName, info: FileStat) -> Claim | str:
    try:
        document = json.loads(data.decode("ascii"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError):
        return UNREADABLE
    except RecursionError:
        return UNDECODABLE.format("nested too deeply")
    if not isinstance(document, dict) or document.get("v") != 1:
        return "not a claim (unknown format)"
    uuid, gpu, uid = document.get("uuid"), document.get("gpu"), document.get("uid")
    user, until = document.get("user"), document.get("until")
    note, job = document.get("note"), document.get("job")
    if not isinstance(uuid, str) or card_key(uuid) != parsed.uuid:
        return f"it names card {clean(str(uuid))[:80]}, but its name card {parsed.uuid}"
    if type(uid) is not int or uid != info.st_uid:
        return f"it names uid {clean(str(uid))[:20]}, but belongs to uid {info.st_uid}"
    if user != user_name(info.st_uid):
        return f"it names user {clean(str(user))[:40]}, but belongs to {user_name(info.st_uid)}"
    if not whole_within(gpu, 0, MAX_GPU_INDEX):
        return "its GPU index is out of range"
    if not isinstance(until, (int, float)) or not within(until, 0.0, LATEST_TIME_S):
        # a string, a bool, NaN, 10**400
        return "its end time is not a number of seconds"
    until = float(until)
    changed = info.st_ctime_ns / 1e9
    if until > changed + MAX_FOR_S + CLOCK_SLACK_S:
        return (
            f"it claims the card until {until:.0f}, more than {MAX_FOR_S / 86400:g} days "
            "after it was written"
        )
    if not isinstance(note, str) or len(note) > MAX_NOTE or clean(note) != note:
        return "its note is too long or holds control characters"
    if job is not None and (type(job) is not int or not 1 <= job <= MAX_JOB_ID):
        return "its job id is out of range"
    if (job is not None) != parsed.job_kind:
        return "its name and its job disagree"
    return Claim(
        name,
        uuid,
        gpu,
        info.st_uid,
        user,
        until,
        note,
        job,
        info.st_ctime_ns,
        info.place_ns,
        info.st_ino,
        info.birth_ns is not None,
    )


def _no_constant(name: str) -> None:
    raise ValueError(name)
