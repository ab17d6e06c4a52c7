"""One claim file: its name, its content, and what makes it believable (docs/claims.md).

``<card>.<uid>.<kind><nonce>.claim``: the card's UUID (``/`` of an old MIG UUID written
``_``), the claimer's uid, ``c`` for a claim a person made or ``j`` for one a gputop job
holds, and a random nonce so that nobody can take a name another user will need. The
content is JSON padded to a fixed size (an extension rewrites it in place, in one write).

What the kernel says wins over what the file says: the owner is the file's ``st_uid``, and
a file whose name or content names another uid, user or card, or an end further from its
inode change time than any claim may last, is ignored (and shown to root as suspicious).
"""

from __future__ import annotations

import json
import math
import os
import pwd
import re
import secrets
import stat
from dataclasses import dataclass
from typing import Any

from gputop.core.numbers import valid_text
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
MAX_GPU_INDEX = 4096
MAX_JOB_ID = 2**53
_NAME = re.compile(r"([A-Za-z0-9_-]{1,96})\.([0-9]{1,10})\.([cj])([0-9a-f]{16})\.claim")


@dataclass(frozen=True)
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
    """The inode's change time: the order between claims, which no user can set back."""

    @property
    def order(self) -> tuple[int, str]:
        return (self.ctime_ns, self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "uuid": self.uuid,
            "user": self.user,
            "until": self.until,
            "note": self.note,
            "job": self.job,
        }


@dataclass(frozen=True)
class Suspicious:
    """A file in the claims directory that is not a believable claim, and why."""

    name: str
    uid: int | None
    reason: str

    def text(self) -> str:
        owner = user_name(self.uid) if self.uid is not None else "?"
        return f"{clean(self.name[:120])} (owner {clean(owner)}): {self.reason}"


@dataclass(frozen=True)
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


def encode_card(uuid: str) -> str:
    return uuid.replace("/", "_")


def parse_name(name: str) -> ParsedName | None:
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return ParsedName(match.group(1).replace("_", "/"), int(match.group(2)), match.group(3) == "j")


def new_name(uuid: str, uid: int, job: bool) -> str:
    return f"{encode_card(uuid)}.{uid}.{'j' if job else 'c'}{secrets.token_hex(8)}{SUFFIX}"


def card_key(uuid: str) -> str:
    """The card as a name holds it (``/`` of old MIG UUIDs as ``_``): how claims are compared."""
    return encode_card(uuid).replace("_", "/")


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


def check_file(info: os.stat_result, parsed: ParsedName) -> str | None:
    """Why a file's kind, mode or owner makes it no claim; None when they are right."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_nlink != 1:
        return "a hard link"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by other users"
    if info.st_uid != parsed.uid:
        return f"its name says uid {parsed.uid}, but it belongs to uid {info.st_uid}"
    if info.st_size != CONTENT_BYTES:
        return f"{info.st_size} bytes, not {CONTENT_BYTES}"
    return None


def parse_content(data: bytes, name: str, parsed: ParsedName, info: os.stat_result) -> Claim | str:
    """The claim, or why this content is not believable for this file."""
    try:
        document = json.loads(data.decode("ascii"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError):
        return UNREADABLE
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
    if type(gpu) is not int or not 0 <= gpu <= MAX_GPU_INDEX:
        return "its GPU index is out of range"
    if isinstance(until, bool) or not isinstance(until, (int, float)):
        return "its end time is not a number"
    if not math.isfinite(until):
        return "its end time is not a number"
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
    return Claim(name, uuid, gpu, info.st_uid, user, float(until), note, job, info.st_ctime_ns)


def _no_constant(name: str) -> None:
    raise ValueError(name)
