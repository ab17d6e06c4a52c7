"""Claiming: the race protocol on the claims directory (docs/claims.md).

No daemon and no lock: every claimer writes its own file, then reads the directory and
applies the rule every reader applies (``scan``) to see whether it won. A claimer that
lost removes its own files (a claim of several cards is all or nothing) and says who won.
"""

from __future__ import annotations

import errno
import math
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from gputop.core.claims import scan as scanning
from gputop.core.claims.directory import OpenDir, claims_path, open_claims_dir, setup_line
from gputop.core.claims.files import (
    MAX_NOTE,
    SUFFIX,
    Claim,
    card_key,
    content,
    new_name,
    parse_name,
    stat_file,
    user_name,
)
from gputop.core.claims.scan import PENDING_S, ClaimsUnreadable, Doubt, Hold, Scan
from gputop.core.errors import GputopError
from gputop.core.records import frozen
from gputop.core.safe_text import clean
from gputop.core.units import local_time

DECIDE_POLL_S = 0.001
OTHERS_POLL_S = 0.05
PAST_WAIT_S = 2.0
CLOCK_REALTIME_COARSE = 5
"""Linux's clock id for it (<time.h>); Python's time module does not name it."""
SETTLED_S = PENDING_S + 5.0
"""A lost claim this old was left behind by a claimer that stopped before removing it; a
younger one is left to its own claimer, still deciding."""
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class ClaimRefused(GputopError):
    """Another user holds (or has just won) a card asked for; nothing was claimed."""

    exit_code = 1


@frozen(slots=False)
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
    return f"until {local_time(until, seconds=False)} ({left_text(until - now)} left)"


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
        """The directory now (``scan.scan``)."""
        return scanning.scan(self.dir, self.clock())

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
        """This user's claims on these cards (default: all; a person's, or with ``job``
        that job's) last at least ``for_s`` from now, never shortened. The file is rewritten
        in place, so its birth time (its place) does not move; where the directory is
        flooded they are still extended (``renew_in_place``): a flood must not make them
        lapse."""
        wanted = None if uuids is None else {card_key(u) for u in uuids}
        try:
            scan = self.scan()
        except ClaimsUnreadable:
            return self._extend_own(wanted, for_s, job)
        self.tidy(scan)
        mine = [
            claim
            for claim in scan.claims
            if self._chosen(claim, wanted, job)
            and _uid_of(scan.first(claim.uuid, self.uid)) == self.uid
        ]
        _refuse_none_held(wanted, mine, "; claim it with gputop claim --gpus")
        until = self.clock() + for_s
        longer = [claim for claim in mine if claim.until < until]
        if not longer:  # each lasts longer already: nothing to write
            return mine
        cards = [Card(claim.uuid, claim.gpu, f"GPU {claim.gpu}") for claim in longer]
        fixed = all(claim.place_fixed for claim in longer)
        if not fixed:  # ordered by change time, which the rewrite moves: see who races
            self._wait_for_others(cards)
        for claim in longer:
            self._rewrite(claim, until)
        try:
            self._decide(cards, [claim.name for claim in longer], strict=False)
        except ClaimRefused:
            if not fixed:
                self._remove_names([claim.name for claim in longer])
            raise
        fresh = {claim.name: claim for claim in self.scan().claims}
        return [fresh[claim.name] for claim in mine if claim.name in fresh]

    def own_claims(self) -> list[Claim]:
        """This user's live, believable claims (also where others flood the directory)."""
        return scanning.own_claims(self.dir, self.uid, self.clock())

    def _extend_own(self, wanted: set[str] | None, for_s: float, job: int | None) -> list[Claim]:
        """``extend`` where the directory is flooded: this user's own claims, in place."""
        mine = [claim for claim in self.own_claims() if self._chosen(claim, wanted, job)]
        _refuse_none_held(wanted, mine)
        until = self.clock() + for_s
        longer = [claim for claim in mine if claim.until < until]
        if longer:
            self.renew_in_place(longer, for_s)
        fresh = {claim.name: claim for claim in self.own_claims()}
        return [fresh[claim.name] for claim in mine if claim.name in fresh]

    def renew_in_place(self, claims: Sequence[Claim], for_s: float) -> list[Claim]:
        """Make these claims of this user's last ``for_s`` from now without reading the
        directory (flooded: which cards others claimed cannot be told). Only claims ordered
        by birth time: the rewrite keeps each one's place, so nothing behind it can take the
        card and nothing before it is overtaken. A claim whose file was removed meanwhile,
        or that is ordered by change time, is left out (GputopError where none is left)."""
        until = self.clock() + for_s
        renewed = []
        for claim in claims:
            if not claim.place_fixed or claim.uid != self.uid:
                continue
            try:
                info = stat_file(self.dir.fd, claim.name)
            except OSError:
                continue
            if info.st_ino != claim.ino or info.st_uid != self.uid:
                continue  # not the file claimed (root removed it, say)
            self._rewrite(claim, until)
            renewed.append(claim)
        if not renewed:
            raise GputopError(
                f"Not extended: the claims directory {self.dir.path} cannot be read as a whole "
                "(flooded), and your claims cannot be rewritten in place (gone, or on a file "
                "system that keeps no birth time)."
            )
        return renewed

    def release(self, uuids: Iterable[str] | None = None, job: int | None = None) -> list[Claim]:
        """End this user's claims: on these cards (default all), a person's (``job`` None)
        or one job's. Refused, ending nothing, where a card is another user's."""
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
        gone = [claim for claim in scan.claims if self._chosen(claim, wanted, job)]
        behind = [c for c, _ in scan.void if isinstance(c, Claim) and self._chosen(c, wanted, job)]
        self._end(scan, gone)
        self._remove_names([claim.name for claim in behind])
        return gone

    def _chosen(self, claim: Claim, wanted: set[str] | None, job: int | None) -> bool:
        """``claim`` is this user's, a person's (``job`` None) or that job's, on a card
        ``wanted`` (``None``: any)."""
        return (
            claim.uid == self.uid
            and claim.job == job
            and (wanted is None or card_key(claim.uuid) in wanted)
        )

    def tidy(self, scan: Scan) -> None:
        """Remove this user's expired claims (or keep them as the mark that voids what
        another user wrote behind them), half-written files and lost races."""
        self._end(scan, [claim for claim in scan.expired if claim.uid == self.uid])
        dead = [name for name, uid in scan.stale if uid == self.uid]
        settled = (self.clock() - SETTLED_S) * 1e9
        for hold, before in scan.void:
            if (
                isinstance(hold, Claim)
                and hold.uid == self.uid
                and hold.order[0] < settled
                and hold.order[0] - before.order[0] < SETTLED_S * 1e9
            ):
                # a race this user lost, its loser left behind; never a claim that an older
                # one of another user's only now covers (that one was rewritten, not raced)
                dead.append(hold.name)
        self._remove_names(dead)

    def _end(self, scan: Scan, claims: Sequence[Claim]) -> None:
        """End these claims of this user's: remove each file, except where another user's
        file was made while it held the card; there it is kept, its end set to now, so that
        what was written behind it never gets the card (docs/claims.md, "Void")."""
        now = self.clock()
        others = [
            hold
            for hold in (*scan.claims, *scan.doubts, *scan.expired, *(h for h, _ in scan.void))
            if hold.uid != self.uid
        ]
        remove = []
        for claim in claims:
            key = card_key(claim.uuid)
            end_ns = min(claim.until, now) * 1e9
            marks = any(
                card_key(other.uuid) == key
                and claim.order < other.order
                and other.order[0] <= end_ns
                for other in others
            )
            if not marks:
                remove.append(claim.name)
            elif claim.until > now:
                ended = math.floor(now * 1000) / 1000  # not rounded up past a later file
                try:
                    self._rewrite(claim, ended)
                except (GputopError, OSError):
                    remove.append(claim.name)
        self._remove_names(remove)

    # --- the protocol's steps ------------------------------------------------------------

    def said(self, card: str, hold: Hold, now: float) -> str:
        if isinstance(hold, Doubt):
            return f"{card} may be claimed by {hold.user} ({hold.reason})"
        return f"{card} is claimed by {hold.user} {until_text(hold.until, now)}"

    def _not_free(self, label: str, other: str, hold: Hold, now: float) -> str:
        """``GPU 0 is not free: ana claimed MIG-… until …``: a related card is held."""
        if isinstance(hold, Doubt):
            return f"{label} is not free: {other} may be claimed by {hold.user} ({hold.reason})"
        return f"{label} is not free: {hold.user} claimed {other} {until_text(hold.until, now)}"

    def _refuse_held(self, scan: Scan, cards: Sequence[Card], mine_too: bool) -> None:
        now = self.clock()
        problems = []
        for card in cards:
            for other in card.related:
                near = scan.first(other, self.uid)
                if near is not None and near.uid != self.uid:
                    problems.append(self._not_free(card.label, other, near, now))
            holder = scan.first(card.uuid, self.uid)
            if holder is None:
                continue
            if holder.uid != self.uid:
                problems.append(self.said(card.label, holder, now))
            elif mine_too and isinstance(holder, Claim):
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

    def _rewrite(self, claim: Claim, until: float) -> None:
        """This user's ``claim`` rewritten in place to last ``until``."""
        name = claim.name
        data = content(claim.uuid, claim.gpu, self.uid, self.user, until, claim.note, claim.job)
        flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, dir_fd=self.dir.fd)
            try:
                info = os.fstat(fd)
                if info.st_uid != self.uid or not stat.S_ISREG(info.st_mode):
                    raise GputopError(f"{clean(name)} is not your claim file.")
                os.pwrite(fd, data, 0)
            finally:
                os.close(fd)
        except OSError as error:
            raise GputopError(
                f"Cannot rewrite the claim {clean(name)} in {self.dir.path}: {error.strerror}."
            ) from None

    def _decide(self, cards: Sequence[Card], made: Sequence[str], strict: bool) -> None:
        """Once the kernel's clock has passed these files' change time, read the directory
        and apply the rule (docs/claims.md, "Why exactly one claimer wins"). ``strict``: this
        very file must be the first (a person's claim); otherwise one of this user's (a
        job's claim, an extension). A file of another user's before it that cannot be told
        loses it the card too: it may be an earlier claim."""
        self._wait_past(made)
        scan = self.scan()
        present = {claim.name: claim for claim in scan.claims}
        now = self.clock()
        lost = []
        being_written = {name for name, uid in scan.pending if uid == self.uid}
        for card, name in zip(cards, made, strict=True):
            # another claimer of this user's, still writing an earlier file, comes first too
            holder = scan.first(card.uuid, self.uid, being_written)
            mine = present.get(name)
            if mine is None:
                if holder is not None and holder.uid != self.uid:
                    lost.append(self._lost_to(card.label, holder, now))
                else:
                    lost.append(f"{card.label}: your claim was removed meanwhile")
                continue
            near = [scan.first(other, self.uid) for other in card.related]
            first = [
                c for c in near if c is not None and c.uid != self.uid and c.order < mine.order
            ]
            if first:
                lost.append(self._not_free(card.label, first[0].uuid, first[0], now))
            elif holder is None:
                lost.append(f"{card.label}: your claim was removed meanwhile")
            elif holder.name == name or (not strict and holder.uid == self.uid):
                continue
            elif holder.uid == self.uid:
                lost.append(f"{card.label}: another claim of yours on it came first")
            else:
                lost.append(self._lost_to(card.label, holder, now))
        if lost:
            raise ClaimRefused("Nothing was claimed: " + "; ".join(lost) + ".")

    def _lost_to(self, label: str, holder: Hold, now: float) -> str:
        if isinstance(holder, Doubt):
            return f"{label} may be claimed by {holder.user} first ({holder.reason})"
        return f"{label}: {holder.user} won the race, {until_text(holder.until, now)}"

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
            young = (self.clock() - SETTLED_S) * 1e9  # older ones are no racer about to leave
            others = [
                c
                for c in scan.claims
                if c.uid != self.uid and card_key(c.uuid) in keys and c.order[0] > young
            ]
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


def _refuse_none_held(wanted: set[str] | None, mine: Sequence[Claim], advice: str = "") -> None:
    """ClaimRefused where this user holds no claim to extend on a card ``wanted`` (or none)."""
    missing = (wanted or set()) - {card_key(claim.uuid) for claim in mine}
    if missing:
        raise ClaimRefused(f"You hold no claim on {', '.join(sorted(missing))} to extend{advice}.")
    if not mine:
        raise ClaimRefused("You hold no claim to extend.")


def _uid_of(hold: Hold | None) -> int | None:
    return None if hold is None else hold.uid


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
