"""Claims as the rest of gputop reads them: per card, never raising (docs/claims.md).

``pick``, ``run``, ``--wait``, the dashboard, ``snapshot --json`` and the exporter ask the
same questions: is this card claimed, by whom, until when; does a claim of another user's
keep this user off it; who uses a card without a claim. A claim on a whole GPU covers its
MIG instances, and a claim on an instance keeps others off the whole GPU.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import field, replace

from gputop.core.claims.book import ClaimBook, left_text, until_text
from gputop.core.claims.directory import UnsafeClaimsDir, claims_path
from gputop.core.claims.files import Claim, card_key
from gputop.core.claims.scan import ClaimsUnreadable, Doubt, Hold, Scan
from gputop.core.errors import GputopError
from gputop.core.model import GpuClaim, GpuSample, Snapshot
from gputop.core.records import mutable
from gputop.core.safe_text import clean

NOT_SET_UP = "not set up"
UNSAFE = "unsafe"
UNKNOWN = "unknown"
"""The directory is there and sound, but cannot be read as a whole (flooded): which cards
are claimed cannot be told, so ``run`` refuses (``--ignore-claims`` launches, marked)."""
READY = "ready"


@mutable
class ClaimsView:
    """The claims of this machine as read once."""

    state: str
    message: str = ""
    """For a person: why claims are not used (not set up here, unsafe directory)."""
    scan: Scan = field(default_factory=Scan)
    now: float = 0.0

    @property
    def in_use(self) -> bool:
        """Claims are set up and someone holds one: unclaimed use is worth pointing out."""
        return self.state == READY and bool(self.scan.claims)

    def holder(self, uuid: str | None) -> Claim | None:
        if not uuid or self.state != READY:
            return None
        return self.scan.holders().get(card_key(uuid))

    def gpu_claim(self, gpu: GpuSample) -> Claim | None:
        """Who holds this GPU: its own claim, else the first claim on one of its instances."""
        own = self.holder(gpu.uuid)
        if own is not None:
            return own
        held = [c for m in gpu.mig_devices if (c := self.holder(m.uuid)) is not None]
        return min(held, key=lambda c: c.order) if held else None

    def gpu_hold(self, gpu: GpuSample) -> Hold | None:
        """What keeps others off this GPU, as shown: its believable claim (``gpu_claim``),
        else the first file on it or an instance of it that may be a claim of another
        user's than this process's and cannot be told, a ``Doubt`` (``run`` refuses the
        card for it: shown, so the card does not look free)."""
        claim = self.gpu_claim(gpu)
        if claim is not None or self.state != READY:
            return claim
        uid = os.geteuid()
        found = [self.scan.first(uuid, uid) for uuid in _keys(gpu)]
        doubts = [d for d in found if isinstance(d, Doubt) and d.uid != uid]
        return min(doubts, key=lambda d: d.order) if doubts else None

    def blocking(self, gpu: GpuSample, uid: int, mig_uuid: str | None = None) -> Hold | None:
        """Another user's claim that keeps ``uid`` off this GPU (or this instance of it), or
        a file of theirs that may be one and cannot be told (a ``Doubt``)."""
        if self.state != READY:
            return None
        uuids = [mig_uuid, gpu.uuid] if mig_uuid is not None else [gpu.uuid]
        if mig_uuid is None:
            uuids += [m.uuid for m in gpu.mig_devices]
        candidates = [self.scan.first(uuid, uid) for uuid in uuids if uuid]
        others = [c for c in candidates if c is not None and c.uid != uid]
        return min(others, key=lambda c: c.order) if others else None

    def reason(self, claim: Hold) -> str:
        """``claimed by ana until 2026-01-02 14:05 (2h left)``, or ``may be claimed by bob
        (its claim file cannot be read (…))``."""
        if isinstance(claim, Doubt):
            return f"may be claimed by {clean(claim.user)} ({clean(claim.reason)})"
        return f"claimed by {clean(claim.user)} {until_text(claim.until, self.now)}"

    def said(self, label: str, claim: Hold) -> str:
        """``GPU 2 is claimed by ana …`` / ``GPU 2 may be claimed by bob (…)``."""
        return f"{label} {'' if isinstance(claim, Doubt) else 'is '}{self.reason(claim)}"

    def blocked_cards(self, snapshot: Snapshot) -> dict[int, str]:
        """``{physical index: why}`` for the GPUs another user's claim keeps this process's
        user off."""
        uid = os.geteuid()
        if self.state == UNKNOWN:  # a flood voids nobody's claim: every card may be claimed
            return {gpu.physical_index: self.unknown_reason() for gpu in snapshot.gpus}
        found = {}
        for gpu in snapshot.gpus:
            claim = self.blocking(gpu, uid)
            if claim is not None:
                found[gpu.physical_index] = self.reason(claim)
        return found

    def unknown_reason(self) -> str:
        return "may be claimed: the claims directory cannot be read (gputop claims says why)"

    def blocked_instances(self, snapshot: Snapshot) -> dict[str, str]:
        """``{MIG uuid: why}`` for instances another user's claim keeps this process's user
        off."""
        uid = os.geteuid()
        if self.state == UNKNOWN:
            return {
                m.uuid: self.unknown_reason()
                for g in snapshot.gpus
                for m in g.mig_devices
                if m.uuid
            }
        found = {}
        for gpu in snapshot.gpus:
            for mig in gpu.mig_devices:
                if mig.uuid and (claim := self.blocking(gpu, uid, mig.uuid)) is not None:
                    found[mig.uuid] = self.reason(claim)
        return found

    def unclaimed_users(self, gpu: GpuSample) -> list[str]:
        """Users whose processes run on this GPU without a claim of theirs on it (only
        while claims are in use on this machine)."""
        if not self.in_use:
            return []
        holders = {c.user for c in self.scan.claims if card_key(c.uuid) in _keys(gpu)}
        users = {p.user for p in gpu.processes if p.user is not None}
        return sorted(users - holders)


def _keys(gpu: GpuSample) -> set[str]:
    keys = {card_key(gpu.uuid)} if gpu.uuid else set()
    keys.update(card_key(m.uuid) for m in gpu.mig_devices if m.uuid)
    return keys


def read_claims(environ: Mapping[str, str] | None = None) -> ClaimsView:
    """The claims now; never raises. This user's expired claims are removed on the way
    (their owner's next gputop does, docs/claims.md)."""
    environ = os.environ if environ is None else environ
    try:
        book = ClaimBook.open(environ)
    except UnsafeClaimsDir as error:
        return ClaimsView(UNSAFE, str(error), now=time.time())
    except OSError as error:
        return ClaimsView(UNSAFE, f"claims cannot be read: {error}", now=time.time())
    if book is None:
        return ClaimsView(
            NOT_SET_UP,
            f"claims are not set up here ({claims_path(environ)} does not exist)",
            now=time.time(),
        )
    try:
        scan = book.scan()
        book.tidy(scan)
    except ClaimsUnreadable as error:
        return ClaimsView(UNKNOWN, str(error), now=time.time())
    except GputopError as error:
        return ClaimsView(UNSAFE, str(error), now=time.time())
    finally:
        book.close()
    return ClaimsView(READY, scan=scan, now=time.time())


def attach_claims(gpus: Sequence[GpuSample], view: ClaimsView) -> list[GpuSample]:
    """The GPUs with who claimed each and who uses it without a claim."""
    if view.state != READY:
        return list(gpus)
    attached = []
    for gpu in gpus:
        hold = view.gpu_hold(gpu)
        if isinstance(hold, Doubt):
            claim = GpuClaim(hold.user, hold.until, doubt=hold.reason)
        elif hold is not None:
            claim = GpuClaim(hold.user, hold.until, hold.note, hold.job)
        else:
            claim = None
        attached.append(replace(gpu, claim=claim, unclaimed_users=tuple(view.unclaimed_users(gpu))))
    return attached


def card_claim_text(gpu: GpuSample, now: float) -> str | None:
    """``claimed by ana · 2h left · note · in use without a claim: bob``, or ``? may be
    claimed by bob · at most 6d · why`` (docs/claims.md); None for a card nobody claimed.
    Cleaned (it may come from another host). Unclaimed users are said on a claimed card
    only: on every card they crowded every border as soon as one claim existed."""
    claim = gpu.claim
    if claim is None:
        return None
    if claim.doubt is not None:  # a file that may be a claim: run refuses the card
        return " · ".join(
            [
                f"? may be claimed by {clean(claim.user)}",
                f"at most {left_text(claim.until - now)}",
                clean(claim.doubt),
            ]
        )
    parts = [f"claimed by {clean(claim.user)}", f"{left_text(claim.until - now)} left"]
    if claim.job is not None:
        parts.append(f"job {claim.job}")
    if claim.note:
        parts.append(clean(claim.note))
    if gpu.unclaimed_users:
        users = ", ".join(clean(user) for user in gpu.unclaimed_users[:3])
        more = len(gpu.unclaimed_users) - 3
        parts.append(f"in use without a claim: {users}" + (f" +{more}" if more > 0 else ""))
    return " · ".join(parts)
