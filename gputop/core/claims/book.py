"""Claims: scanning the shared directory and the race protocol (docs/claims.md).

No daemon and no lock: every claimer writes its own file and then decides, by a rule every
reader applies the same way, whether it won. The rule is the earliest believable, complete,
live claim on a card holds it, ordered by the file's inode change time (set by the kernel
when the content is written, never settable backwards by a user), then by its name. A
claimer that lost removes its own files (all of them: a claim of several cards is all or
nothing) and says who won.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gputop.core.claims.directory import (
    OpenDir,
    UnsafeClaimsDir,
    claims_path,
    open_claims_dir,
    setup_line,
)
from gputop.core.claims.files import (
    CONTENT_BYTES,
    MAX_NOTE,
    SUFFIX,
    UNREADABLE,
    Claim,
    Suspicious,
    card_key,
    check_file,
    content,
    new_name,
    parse_content,
    parse_name,
    user_name,
)
from gputop.core.errors import GputopError
from gputop.core.safe_text import clean

PENDING_S = 2.0
"""A file not yet complete (created, content not yet written) this recently is being
written; an older one was left by a claimer that stopped half-way, and its owner's next
gputop removes it. Neither is ever a claim."""
DECIDE_POLL_S = 0.001
OTHERS_POLL_S = 0.05
PAST_WAIT_S = 2.0
CLOCK_REALTIME_COARSE = 5
"""Linux's clock id for it (<time.h>); Python's time module does not name it."""
SETTLED_S = PENDING_S + 5.0
"""A lost claim this old was left behind by a claimer that stopped before removing it; a
younger one is left to its own claimer, still deciding."""
MAX_ENTRIES = 10_000
"""More entries than this in the directory: it is flooded, and claims are not used (each
entry costs every reader a stat, every refresh; 10 000 is a few milliseconds)."""
MAX_FILES_PER_USER = 256
"""More claim files than this of one uid: all of that uid's files are ignored."""
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class ClaimRefused(GputopError):
    """Another user holds (or has just won) a card asked for; nothing was claimed."""

    exit_code = 1


@dataclass
class Scan:
    """What the directory holds now."""

    claims: list[Claim] = field(default_factory=list)
    """Believable, complete and live: the ones that may hold a card."""
    expired: list[Claim] = field(default_factory=list)
    pending: list[tuple[str, int]] = field(default_factory=list)
    """(name, uid) of files created moments ago whose content is not written yet."""
    stale: list[tuple[str, int]] = field(default_factory=list)
    """(name, uid) of files left half-written by a claimer that stopped."""
    suspicious: list[Suspicious] = field(default_factory=list)

    def holders(self) -> dict[str, Claim]:
        """``{card: the claim that holds it}``: the earliest on each card."""
        best: dict[str, Claim] = {}
        for claim in self.claims:
            key = card_key(claim.uuid)
            if key not in best or claim.order < best[key].order:
                best[key] = claim
        return best

    def on(self, uuid: str) -> list[Claim]:
        key = card_key(uuid)
        return [claim for claim in self.claims if card_key(claim.uuid) == key]


@dataclass(frozen=True)
class Card:
    """A card to claim: its UUID (GPU- or MIG-) and physical index, as a person names it."""

    uuid: str
    gpu: int
    label: str
    related: tuple[str, ...] = ()
    """The GPU of an instance, or the instances of a GPU: another user's claim on one of
    them keeps this user off this card too."""


def until_text(until: float, now: float) -> str:
    """``until 2026-01-02 14:05 (2h left)``."""
    moment = time.strftime("%Y-%m-%d %H:%M", time.localtime(until))
    return f"until {moment} ({left_text(until - now)} left)"


def left_text(seconds: float) -> str:
    """``2h``, ``45m``, ``1d 4h``: how long a claim has left, as a card says it."""
    seconds = max(0.0, seconds)
    if seconds >= 86400 - 1800:
        days, rest = divmod(round(seconds / 3600), 24)
        return f"{days}d {rest}h" if rest else f"{days}d"
    if seconds >= 3600 - 30:
        return f"{round(seconds / 3600)}h"
    return f"{max(1, round(seconds / 60))}m"


class ClaimBook:
    """The claims directory, open, as this user sees it."""

    def __init__(self, directory: OpenDir, uid: int | None = None) -> None:
        self.dir = directory
        self.uid = os.geteuid() if uid is None else uid
        self.user = user_name(self.uid)
        self.clock: Callable[[], float] = time.time

    @classmethod
    def open(cls, environ: Mapping[str, str] | None = None) -> ClaimBook | None:
        """The book, or None where claims are not set up; UnsafeClaimsDir where unsafe."""
        directory = open_claims_dir(claims_path(environ))
        return None if directory is None else cls(directory)

    def close(self) -> None:
        self.dir.close()

    def __enter__(self) -> ClaimBook:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- reading -------------------------------------------------------------------------

    def scan(self) -> Scan:
        now = self.clock()
        result = Scan()
        try:
            names = os.listdir(self.dir.fd)
        except OSError as error:
            raise UnsafeClaimsDir(
                f"The claims directory cannot be listed: {error.strerror}."
            ) from None
        if len(names) > MAX_ENTRIES:
            raise UnsafeClaimsDir(
                f"The claims directory {self.dir.path} holds more than {MAX_ENTRIES} entries: "
                "someone flooded it; an administrator must clean it up "
                f"(ls -ln {self.dir.path} shows whose files they are)."
            )
        found: dict[int, list[tuple[str, os.stat_result]]] = {}
        for name in names:
            try:
                info = os.stat(name, dir_fd=self.dir.fd, follow_symlinks=False)
            except OSError:
                continue  # removed meanwhile
            parsed = parse_name(name)
            if parsed is None:
                if not name.endswith(".tmp"):
                    result.suspicious.append(Suspicious(name, info.st_uid, "not a claim's name"))
                continue
            found.setdefault(info.st_uid, []).append((name, info))
        for uid, files in found.items():
            if len(files) > MAX_FILES_PER_USER:
                result.suspicious.append(
                    Suspicious(
                        f"{len(files)} files", uid, f"more than {MAX_FILES_PER_USER}: all ignored"
                    )
                )
                continue
            for name, info in files:
                self._read_one(name, info, now, result)
        return result

    def _read_one(self, name: str, info: os.stat_result, now: float, result: Scan) -> None:
        parsed = parse_name(name)
        assert parsed is not None
        young = now - info.st_ctime_ns / 1e9 < PENDING_S
        problem = check_file(info, parsed)
        if problem is not None:
            if info.st_size < CONTENT_BYTES and problem.startswith(f"{info.st_size} bytes"):
                # being written, or left half-written: never believed, never suspicious
                (result.pending if young else result.stale).append((name, info.st_uid))
                return
            result.suspicious.append(Suspicious(name, info.st_uid, problem))
            return
        data = self._read(name)
        if data is None:
            return  # removed meanwhile, or not a plain file any more
        claim, after = data
        if (after.st_ino, after.st_ctime_ns) != (info.st_ino, info.st_ctime_ns):
            info = after  # rewritten meanwhile (an extension): judged as it is now
            if check_file(info, parsed) is not None:
                result.pending.append((name, info.st_uid))
                return
        parsed_claim = parse_content(claim, name, parsed, info)
        if isinstance(parsed_claim, str):
            if young and parsed_claim == UNREADABLE:  # an extension being written right now
                result.pending.append((name, info.st_uid))
            else:
                result.suspicious.append(Suspicious(name, info.st_uid, parsed_claim))
            return
        (result.claims if parsed_claim.until > now else result.expired).append(parsed_claim)

    def _read(self, name: str) -> tuple[bytes, os.stat_result] | None:
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=self.dir.fd)
        except OSError:
            return None
        try:
            data = os.read(fd, CONTENT_BYTES + 1)
            return data, os.fstat(fd)
        except OSError:
            return None
        finally:
            os.close(fd)

    # --- claiming ------------------------------------------------------------------------

    def claim(
        self,
        cards: Sequence[Card],
        for_s: float,
        note: str = "",
        job: int | None = None,
    ) -> list[Claim]:
        """Claim every card or none; ClaimRefused names who holds or won the others.

        A person's claim is refused on a card this user already holds (``extend`` it); a
        job's claim rides on its user's own claims of the card.
        """
        if not self.dir.writable:
            raise GputopError(
                f"The claims directory {self.dir.path} is not writable by users (mode 1777 "
                f"is needed): {setup_line(self.dir.path)}"
            )
        note = clean(note)[:MAX_NOTE]  # a note is shown on every user's terminal
        scan = self.scan()
        self.tidy(scan)
        self._refuse_held(scan, cards, mine_too=job is None)
        now = self.clock()
        until = now + for_s
        made: list[str] = []
        try:
            for card in cards:
                name = new_name(card.uuid, self.uid, job is not None)
                self._create(
                    name, content(card.uuid, card.gpu, self.uid, self.user, until, note, job)
                )
                made.append(name)
            self._decide(cards, made, strict=job is None)
        except BaseException:
            self._remove_names(made)
            raise
        scan = self.scan()
        mine = {claim.name: claim for claim in scan.claims}
        return [mine[name] for name in made if name in mine]

    def extend(
        self, uuids: Iterable[str] | None, for_s: float, job: int | None = None
    ) -> list[Claim]:
        """This user's claims on these cards (default: all of them; a person's, or with
        ``job`` that job's) last at least ``for_s`` from now: a claim that already lasts
        longer is kept as it is, never shortened (``release`` gives a card back). A card
        another user has meanwhile won is lost (and said)."""
        scan = self.scan()
        self.tidy(scan)
        wanted = None if uuids is None else {card_key(u) for u in uuids}
        holders = scan.holders()
        mine = [
            claim
            for claim in scan.claims
            if claim.uid == self.uid
            and claim.job == job
            and (wanted is None or card_key(claim.uuid) in wanted)
            and holders[card_key(claim.uuid)].uid == self.uid
        ]
        if wanted is not None:
            missing = wanted - {card_key(claim.uuid) for claim in mine}
            if missing:
                raise ClaimRefused(
                    f"You hold no claim on {', '.join(sorted(missing))} to extend; claim it "
                    "with gputop claim --gpus."
                )
        if not mine:
            raise ClaimRefused("You hold no claim to extend.")
        until = self.clock() + for_s
        longer = [claim for claim in mine if claim.until < until]
        if not longer:  # each lasts longer already: nothing to write
            return mine
        cards = [Card(claim.uuid, claim.gpu, f"GPU {claim.gpu}") for claim in longer]
        self._wait_for_others(cards)
        for claim in longer:
            data = content(claim.uuid, claim.gpu, self.uid, self.user, until, claim.note, claim.job)
            self._rewrite(claim.name, data)
        try:
            self._decide(cards, [claim.name for claim in longer], strict=False)
        except ClaimRefused:
            self._remove_names([claim.name for claim in longer])
            raise
        fresh = {claim.name: claim for claim in self.scan().claims}
        return [fresh[claim.name] for claim in mine if claim.name in fresh]

    def release(self, uuids: Iterable[str] | None = None, job: int | None = None) -> list[Claim]:
        """Remove this user's claims: on these cards (default all), a person's (``job``
        None) or one job's. Refused, removing nothing, where a card is another user's."""
        scan = self.scan()
        self.tidy(scan)
        wanted = None if uuids is None else {card_key(u) for u in uuids}
        if wanted is not None and job is None:
            holders = scan.holders()
            theirs = [
                holders[key]
                for key in sorted(wanted)
                if key in holders and holders[key].uid != self.uid
            ]
            if theirs:
                raise ClaimRefused(
                    "Nothing was released: "
                    + "; ".join(
                        f"GPU {c.gpu} is claimed by {c.user}, not you; only {c.user} can release it"
                        for c in theirs
                    )
                )
        gone = [
            claim
            for claim in scan.claims
            if claim.uid == self.uid
            and claim.job == job
            and (wanted is None or card_key(claim.uuid) in wanted)
        ]
        self._remove_names([claim.name for claim in gone])
        return gone

    def tidy(self, scan: Scan) -> None:
        """Remove this user's expired claims, half-written files and lost races."""
        holders = scan.holders()
        dead = [claim.name for claim in scan.expired if claim.uid == self.uid]
        dead += [name for name, uid in scan.stale if uid == self.uid]
        settled = (self.clock() - SETTLED_S) * 1e9
        for claim in scan.claims:
            holder = holders[card_key(claim.uuid)]
            if claim.uid == self.uid and holder.uid != self.uid and claim.ctime_ns < settled:
                dead.append(claim.name)  # a race this user lost, its loser left behind
        self._remove_names(dead)

    # --- the protocol's steps ------------------------------------------------------------

    def _refuse_held(self, scan: Scan, cards: Sequence[Card], mine_too: bool) -> None:
        now = self.clock()
        holders = scan.holders()
        problems = []
        for card in cards:
            for other in card.related:
                near = holders.get(card_key(other))
                if near is not None and near.uid != self.uid:
                    problems.append(
                        f"{card.label} is not free: {near.user} claimed {other} "
                        f"{until_text(near.until, now)}"
                    )
            holder = holders.get(card_key(card.uuid))
            if holder is None:
                continue
            if holder.uid != self.uid:
                problems.append(
                    f"{card.label} is claimed by {holder.user} {until_text(holder.until, now)}"
                )
            elif mine_too:
                problems.append(
                    f"{card.label} is already claimed by you {until_text(holder.until, now)}; "
                    "gputop claim --extend makes it last longer"
                )
        if problems:
            raise ClaimRefused("Nothing was claimed: " + "; ".join(problems) + ".")

    def _create(self, name: str, data: bytes) -> None:
        try:
            fd = os.open(name, CREATE_FLAGS, 0o644, dir_fd=self.dir.fd)
        except OSError as error:
            if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise GputopError(
                    f"Cannot write in the claims directory {self.dir.path}: {error.strerror}. "
                    f"{setup_line(self.dir.path)}"
                ) from None
            raise GputopError(
                f"Cannot make a claim in {self.dir.path}: {error.strerror}."
            ) from None
        try:
            os.fchmod(fd, 0o644)  # before the content: the last change is the write
            written = os.write(fd, data)
            if written != len(data):
                raise GputopError(f"Cannot make a claim in {self.dir.path}: the disk is full.")
        except OSError as error:
            raise GputopError(
                f"Cannot make a claim in {self.dir.path}: {error.strerror}."
            ) from None
        finally:
            os.close(fd)

    def _rewrite(self, name: str, data: bytes) -> None:
        fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.dir.fd)
        try:
            if os.fstat(fd).st_uid != self.uid:
                raise GputopError(f"{name} is not yours.")
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)

    def _decide(self, cards: Sequence[Card], made: Sequence[str], strict: bool) -> None:
        """Once the kernel's clock has passed these files' change time, read the directory
        and apply the rule (docs/claims.md, "Why exactly one claimer wins"). ``strict``: this
        very file must be the earliest (a person's claim); otherwise one of this user's (a
        job's claim, an extension)."""
        self._wait_past(made)
        scan = self.scan()
        holders = scan.holders()
        present = {claim.name: claim for claim in scan.claims}
        now = self.clock()
        lost = []
        for card, name in zip(cards, made, strict=True):
            holder = holders.get(card_key(card.uuid))
            if name not in present or holder is None:
                lost.append(f"{card.label}: your claim was removed meanwhile")
                continue
            near = [holders.get(card_key(other)) for other in card.related]
            first = [
                c
                for c in near
                if c is not None and c.uid != self.uid and c.order < present[name].order
            ]
            if first:
                lost.append(
                    f"{card.label}: {first[0].user} claimed {first[0].uuid} first, "
                    f"{until_text(first[0].until, now)}"
                )
            elif holder.name == name or (not strict and holder.uid == self.uid):
                continue
            elif holder.uid == self.uid:
                lost.append(f"{card.label}: another claim of yours on it came first")
            else:
                lost.append(
                    f"{card.label}: {holder.user} won the race, {until_text(holder.until, now)}"
                )
        if lost:
            raise ClaimRefused("Nothing was claimed: " + "; ".join(lost) + ".")

    def _wait_past(self, made: Sequence[str]) -> None:
        """Wait until every change time the kernel gives from now on is later than these
        files' (at most ``PAST_WAIT_S``: a clock stepped back is not waited out). Any file
        this user's next look does not find complete is then written after it, so it is
        later than these; none can tie with them."""
        latest = 0
        for name in made:
            try:
                latest = max(
                    latest, os.stat(name, dir_fd=self.dir.fd, follow_symlinks=False).st_ctime_ns
                )
            except OSError:
                continue
        step = _granularity_ns(latest)
        deadline = time.monotonic() + PAST_WAIT_S
        while time.monotonic() < deadline:
            now = _coarse_now_ns()
            if now - now % step > latest:
                return
            time.sleep(DECIDE_POLL_S)

    def _wait_for_others(self, cards: Sequence[Card]) -> None:
        """Before an extension moves this user's change time: no other user's file may be
        on the card (a race's loser about to leave), or the order could flip."""
        keys = {card_key(card.uuid) for card in cards}
        deadline = time.monotonic() + PENDING_S + 1.0
        while True:
            scan = self.scan()
            others = [c for c in scan.claims if c.uid != self.uid and card_key(c.uuid) in keys]
            others_pending = [
                name
                for name, uid in scan.pending
                if uid != self.uid and (p := parse_name(name)) and p.uuid in keys
            ]
            if not others and not others_pending:
                return
            if time.monotonic() > deadline:
                who = sorted({c.user for c in others} | {user_name(u) for _, u in scan.pending})
                raise ClaimRefused(
                    "Not extended: a claim file of "
                    + ", ".join(who)
                    + " is on the same card (a lost race not yet cleaned up); try again later."
                )
            time.sleep(OTHERS_POLL_S)

    def _remove_names(self, names: Iterable[str]) -> None:
        """Remove files, each only if it is this user's (root may remove anyone's in a
        sticky directory; gputop never does)."""
        for name in names:
            try:
                info = os.stat(name, dir_fd=self.dir.fd, follow_symlinks=False)
                if info.st_uid == self.uid and name.endswith(SUFFIX):
                    os.unlink(name, dir_fd=self.dir.fd)
            except OSError:
                continue


def _coarse_now_ns() -> int:
    """The clock the kernel stamps inode times from (the coarse one, which lags the precise
    one: a stamp made later is never earlier than it)."""
    if sys.platform.startswith("linux"):
        return time.clock_gettime_ns(CLOCK_REALTIME_COARSE)
    return time.time_ns()


def _granularity_ns(ctime_ns: int) -> int:
    """The file system's time step as a stamp shows it: whole seconds on file systems that
    keep no more (ext3), else a millisecond or a nanosecond."""
    for step in (1_000_000_000, 1_000_000):
        if ctime_ns % step == 0:
            return step
    return 1
