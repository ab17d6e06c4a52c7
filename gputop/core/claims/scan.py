"""Reading the claims directory: which file holds each card (docs/claims.md).

Files are ordered by birth time (the kernel's; nobody can move it), then by name. The first
file on a card holds it: a believable live claim, or a file of another user's that cannot
be told (unreadable, being written, half written, undecodable): where gputop cannot tell,
it does not take the card. A file made while another user's believable claim held the card
is void and never holds it. A file that cannot be read is that file's problem, never the
reader's exception.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import field

from gputop.core.claims.directory import OpenDir, UnsafeClaimsDir
from gputop.core.claims.files import (
    CLOCK_SLACK_S,
    CONTENT_BYTES,
    MAX_FOR_S,
    UNREADABLE,
    Claim,
    FileStat,
    ParsedName,
    Suspicious,
    card_key,
    check_file,
    parse_content,
    parse_name,
    stat_file,
    user_name,
)
from gputop.core.records import frozen, mutable

PENDING_S = 2.0
"""A file not yet complete (created, content not yet written) this recently is being
written; an older one was left by a claimer that stopped half-way, and its owner's next
gputop removes it. Neither is ever a claim."""
MAX_ENTRIES = 10_000
"""More entries than this in the directory: it is flooded, and claims are not used (each
entry costs every reader a stat, every refresh; 10 000 is a few milliseconds)."""
MAX_FILES_PER_USER = 256
"""More claim files than this of one uid: all of that uid's files are ignored."""
DOUBT_LIFE_S = MAX_FOR_S + CLOCK_SLACK_S
"""A file that cannot be told holds its card for its owner at most this long from its
place (its birth time; its change time where the file system keeps no birth): as long as
the longest claim gputop grants, so one garbage file is never stronger than a claim."""
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class ClaimsUnreadable(UnsafeClaimsDir):
    """The directory cannot be read as a whole (flooded, not listable): nobody can tell
    which cards are claimed. ``run`` refuses; ``--ignore-claims`` launches, marked."""


@frozen(slots=False)
class Doubt:
    """A file that may hold a card for its owner (the kernel's ``st_uid``), though it is
    no believable claim: it cannot be read, is being written or was left half-written, or
    its content cannot be believed. Where gputop cannot tell, the card may be held."""

    name: str
    uuid: str
    """The card its name gives."""
    uid: int
    place_ns: int
    reason: str
    ino: int = 0

    @property
    def user(self) -> str:
        return user_name(self.uid)

    @property
    def order(self) -> tuple[int, str]:
        return (self.place_ns, self.name)

    @property
    def until(self) -> float:
        """When it stops holding its card, at the latest (``DOUBT_LIFE_S`` after its place)."""
        return self.place_ns / 1e9 + DOUBT_LIFE_S


Hold = Claim | Doubt


@mutable
class Scan:
    """What the directory holds now."""

    claims: list[Claim] = field(default_factory=list)
    """Believable, complete, live and not void: the ones that may hold a card."""
    expired: list[Claim] = field(default_factory=list)
    doubts: list[Doubt] = field(default_factory=list)
    """Files that may hold a card and cannot be told (not void)."""
    void: list[tuple[Hold, Claim]] = field(default_factory=list)
    """(file, the claim it was made behind): made while another user's claim held the card."""
    pending: list[tuple[str, int]] = field(default_factory=list)
    """(name, uid) of files created moments ago whose content is not written yet."""
    stale: list[tuple[str, int]] = field(default_factory=list)
    """(name, uid) of files left half-written by a claimer that stopped."""
    suspicious: list[Suspicious] = field(default_factory=list)
    outlived: list[Doubt] = field(default_factory=list)
    """Files that cannot be told, older than any claim may last (``DOUBT_LIFE_S``): they
    hold nothing any more (shown as suspicious)."""

    def holders(self) -> dict[str, Claim]:
        """``{card: the believable claim that holds it}``: the earliest on each card."""
        best: dict[str, Claim] = {}
        for claim in self.claims:
            key = card_key(claim.uuid)
            if key not in best or claim.order < best[key].order:
                best[key] = claim
        return best

    def first(self, uuid: str, uid: int | None = None, also: Collection[str] = ()) -> Hold | None:
        """What holds the card as ``uid`` sees it: the earliest live claim or doubtful file
        on it (``uid``'s own doubtful files aside, its own gputop tidies them, but for those
        named in ``also``: its files being written right now, by another of its claimers)."""
        key = card_key(uuid)
        found: Hold | None = None
        holds: list[Hold] = [*self.claims, *self.doubts]
        for hold in holds:
            if card_key(hold.uuid) != key:
                continue
            if isinstance(hold, Doubt) and hold.uid == uid and hold.name not in also:
                continue
            if found is None or hold.order < found.order:
                found = hold
        return found

    def on(self, uuid: str) -> list[Claim]:
        key = card_key(uuid)
        return [claim for claim in self.claims if card_key(claim.uuid) == key]


def _names(directory: OpenDir) -> list[str]:
    try:
        return os.listdir(directory.fd)
    except OSError as error:
        raise ClaimsUnreadable(
            f"The claims directory cannot be listed: {error.strerror}."
        ) from None


def scan(directory: OpenDir, now: float) -> Scan:
    """The directory at ``now``. A file that cannot be read or believed is that file's
    problem (a doubt, shown as suspicious), never an exception for the reader."""
    result = Scan()
    names = _names(directory)
    if len(names) > MAX_ENTRIES:
        raise ClaimsUnreadable(
            f"The claims directory {directory.path} holds more than {MAX_ENTRIES} entries: "
            "someone flooded it; an administrator must clean it up "
            f"(ls -ln {directory.path} shows whose files they are)."
        )
    found: dict[int, list[tuple[str, ParsedName, FileStat]]] = {}
    for name in names:
        parsed = parse_name(name)
        if parsed is None:  # no claim: its owner is all that is said of it
            if not name.endswith(".tmp"):
                try:
                    owner = os.stat(name, dir_fd=directory.fd, follow_symlinks=False).st_uid
                except OSError:
                    continue
                result.suspicious.append(Suspicious(name, owner, "not a claim's name"))
            continue
        try:
            info = stat_file(directory.fd, name)
        except FileNotFoundError:
            continue  # removed meanwhile
        except OSError as error:
            # the name says whose: it may be a claim, placed now (behind all)
            said = f"it cannot be examined ({error.strerror or error})"
            _doubt(result, Doubt(name, parsed.uuid, parsed.uid, int(now * 1e9), said))
            continue
        found.setdefault(info.st_uid, []).append((name, parsed, info))
    for uid, files in found.items():
        if len(files) > MAX_FILES_PER_USER:
            result.suspicious.append(
                Suspicious(
                    f"{len(files)} files", uid, f"more than {MAX_FILES_PER_USER}: none believed"
                )
            )
            why = f"one of its more than {MAX_FILES_PER_USER} files there"
            for name, parsed, info in files:
                result.doubts.append(Doubt(name, parsed.uuid, uid, info.place_ns, why, info.st_ino))
            continue
        for name, parsed, info in files:
            try:
                _read_one(directory.fd, name, parsed, info, now, result)
            except Exception as error:  # the file's problem, said as such
                reason = f"it cannot be read ({type(error).__name__})"
                _doubt(result, Doubt(name, parsed.uuid, uid, info.place_ns, reason, info.st_ino))
    _settle(result)
    _outlive(result, now)
    return result


def _read_one(
    dir_fd: int, name: str, parsed: ParsedName, info: FileStat, now: float, result: Scan
) -> None:
    young = now - info.place_ns / 1e9 < PENDING_S

    def doubt(reason: str, suspicious: bool = True) -> None:
        held = Doubt(name, parsed.uuid, info.st_uid, info.place_ns, reason, info.st_ino)
        _doubt(result, held, suspicious)

    problem = check_file(info, parsed)
    if problem is not None:
        if info.st_size < CONTENT_BYTES and problem.startswith(f"{info.st_size} bytes"):
            # being written, or left half-written: never believed, never suspicious
            (result.pending if young else result.stale).append((name, info.st_uid))
            doubt("its claim is being written" if young else "a claim left half-written", False)
            return
        doubt(problem)
        return
    data = read_file(dir_fd, name)
    if data is None:
        return  # removed meanwhile
    if isinstance(data, str):  # a lease, a mode: it may be a claim, and it cannot be read
        doubt(f"its claim file cannot be read ({data})")
        return
    claim, after = data
    if (after.st_ino, after.st_ctime_ns) != (info.st_ino, info.st_ctime_ns):
        info = after  # rewritten meanwhile (an extension): judged as it is now
        if check_file(info, parsed) is not None:
            result.pending.append((name, info.st_uid))
            doubt("its claim is being rewritten", False)
            return
    parsed_claim = parse_content(claim, name, parsed, info)
    if isinstance(parsed_claim, str):
        written_now = now - info.st_ctime_ns / 1e9 < PENDING_S
        if written_now and parsed_claim == UNREADABLE:  # an extension being written now
            result.pending.append((name, info.st_uid))
            doubt("its claim is being written", False)
        else:
            doubt(parsed_claim)
        return
    (result.claims if parsed_claim.until > now else result.expired).append(parsed_claim)


def _doubt(result: Scan, doubt: Doubt, suspicious: bool = True) -> None:
    """``doubt`` kept, and shown to root as suspicious unless it is a claim being written."""
    if suspicious:
        result.suspicious.append(Suspicious(doubt.name, doubt.uid, doubt.reason))
    result.doubts.append(doubt)


def read_file(dir_fd: int, name: str) -> tuple[bytes, FileStat] | str | None:
    """The content and what the kernel says of the file as read; why it cannot be read
    (a lease another user holds makes a non-blocking open fail); None if it is gone."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as error:
        return error.strerror or str(error)
    try:
        data = os.read(fd, CONTENT_BYTES + 1)
        return data, stat_file(fd)
    except OSError as error:
        return error.strerror or str(error)
    finally:
        os.close(fd)


def own_claims(directory: OpenDir, uid: int, now: float) -> list[Claim]:
    """``uid``'s live, believable claims, read without the other users' files (so also
    where those flood the directory)."""
    found = []
    for name in _names(directory):
        parsed = parse_name(name)
        if parsed is None or parsed.uid != uid:
            continue
        try:
            info = stat_file(directory.fd, name)
        except OSError:
            continue
        if check_file(info, parsed) is not None:
            continue
        data = read_file(directory.fd, name)
        if data is None or isinstance(data, str):
            continue
        claim = parse_content(data[0], name, parsed, data[1])
        if isinstance(claim, Claim) and claim.until > now:
            found.append(claim)
    return found


def _settle(scan: Scan) -> None:
    """Void what was made behind another user's claim: a file (claim or doubt) born while
    an earlier, not void, believable claim of another user on the same card was to last.
    gputop never writes one (it looks first), so it never holds the card, not even once
    that claim ends. Doubtful files that are other names (hard links) of a believable
    claim's inode are that claim, not another hold."""
    believed = {claim.ino for claim in (*scan.claims, *scan.expired) if claim.ino}
    for doubt in [d for d in scan.doubts if d.ino and d.ino in believed]:
        scan.doubts.remove(doubt)
    by_card: dict[str, list[Hold]] = {}
    every: list[Hold] = [*scan.claims, *scan.expired, *scan.doubts]
    for hold in every:
        by_card.setdefault(card_key(hold.uuid), []).append(hold)
    void: set[int] = set()
    for holds in by_card.values():
        holds.sort(key=lambda hold: hold.order)
        lasting: dict[int, Claim] = {}  # per uid, its claim lasting longest so far
        for hold in holds:
            before = [
                claim
                for uid, claim in lasting.items()
                if uid != hold.uid and claim.until * 1e9 >= hold.order[0]
            ]
            if before:
                scan.void.append((hold, before[0]))
                void.add(id(hold))
            elif isinstance(hold, Claim) and (
                hold.uid not in lasting or lasting[hold.uid].until < hold.until
            ):
                lasting[hold.uid] = hold
    if void:
        scan.claims = [c for c in scan.claims if id(c) not in void]
        scan.expired = [c for c in scan.expired if id(c) not in void]
        scan.doubts = [d for d in scan.doubts if id(d) not in void]


def _outlive(scan: Scan, now: float) -> None:
    """Drop the files that cannot be told and are older than any claim may last: a possible
    hold ends where a claim would have (``DOUBT_LIFE_S`` after its birth), so one unreadable
    file never keeps a card for ever. A file being written right now is left in line (an
    extension of an old claim, rewritten in place, is read half-written for a moment)."""
    writing = {name for name, _ in scan.pending}
    limit = (now - DOUBT_LIFE_S) * 1e9

    def outlived(hold: Hold) -> bool:
        return isinstance(hold, Doubt) and hold.place_ns < limit and hold.name not in writing

    old = [d for d in scan.doubts if outlived(d)]
    scan.void = [(hold, before) for hold, before in scan.void if not outlived(hold)]
    if not old:
        return
    names = {doubt.name for doubt in old}
    scan.doubts = [d for d in scan.doubts if d.name not in names]
    scan.outlived.extend(old)
    scan.suspicious = [odd for odd in scan.suspicious if odd.name not in names]
    days = f"{MAX_FOR_S / 86400:g} days"
    for doubt in old:
        reason = f"older than {days}, the longest a claim lasts: ignored ({doubt.reason})"
        scan.suspicious.append(Suspicious(doubt.name, doubt.uid, reason))
