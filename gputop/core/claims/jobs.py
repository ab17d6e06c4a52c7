"""Claims and gputop's jobs (docs/claims.md, "Jobs"): a job holds a claim on its cards
while it runs, renewed by its supervisor, released when it ends; a job launched with
``--ignore-claims`` is marked in its recorded environment and claims nothing."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence

from gputop.core import settings
from gputop.core.claims.book import Card, ClaimBook, ClaimRefused, ClaimsUnreadable
from gputop.core.claims.directory import UnsafeClaimsDir
from gputop.core.claims.view import UNKNOWN, ClaimsView
from gputop.core.errors import GputopError
from gputop.core.model import Snapshot

IGNORED_ENV = settings.IGNORED_CLAIMS.name
"""In a job's environment: the claims it was launched over (``GPU 2 (ana)``)."""
JOB_CLAIM_S = 30 * 60.0
"""A job's claim lasts this long from its last renewal: a supervisor killed outright leaves
a claim that ends by itself."""
RENEW_AFTER_S = 10 * 60.0


def claims_in_the_way(
    view: ClaimsView, snapshot: Snapshot, targets: Sequence[int | str], uid: int
) -> list[str]:
    """``GPU 2 is claimed by ana until … (2h left)`` for each target another user holds."""
    from gputop.core.mig_targets import mig_target_by_uuid

    by_index = {gpu.physical_index: gpu for gpu in snapshot.gpus}
    said = []
    for target in targets:
        if isinstance(target, str):
            found = mig_target_by_uuid(snapshot.gpus, target)
            if found is None:
                continue
            claim = view.blocking(found.gpu, uid, target)
            label = found.label
        else:
            gpu = by_index.get(target)
            if gpu is None:
                continue
            claim = view.blocking(gpu, uid)
            label = f"GPU {target}"
        if claim is not None:
            said.append(view.said(label, claim))
    return said


RUN_ADVICE = (
    "Choose other cards, add --wait to start once the claim ends, or --ignore-claims to "
    "launch anyway (the job is marked so)."
)
"""What ``gputop run`` suggests when it refuses claimed cards."""
RUN_UNKNOWN_ADVICE = "--ignore-claims launches anyway (the job is marked so)."
"""What ``gputop run`` suggests where the claims cannot be read."""


class ClaimedCards(GputopError):
    """A launch onto cards another user claimed: nothing was launched, nothing recorded."""


def check_claims_known(
    view: ClaimsView, *, ignore: bool = False, advice: str = RUN_UNKNOWN_ADVICE
) -> None:
    """Raise ``ClaimedCards`` where which cards other users claimed cannot be told (a
    flooded claims directory) and the launch does not ignore claims: a flood voids nobody's
    claim, so every card may be claimed, waiting or not."""
    if view.state == UNKNOWN and not ignore:
        raise ClaimedCards(
            f"Nothing was launched: {view.message} Which cards other users claimed cannot "
            f"be told; {advice}"
        )


def check_launch_claims(
    view: ClaimsView,
    snapshot: Snapshot,
    targets: Sequence[int | str],
    uid: int,
    *,
    wait: bool,
    ignore: bool = False,
    advice: str = RUN_ADVICE,
    unknown_advice: str = RUN_UNKNOWN_ADVICE,
) -> list[str]:
    """What stands in the way of launching on ``targets`` (``claims_in_the_way``); raises
    ``ClaimedCards`` where a claim does and the launch neither waits for it nor ignores it,
    or where the claims cannot be told (``check_claims_known``).

    ``gputop run`` and the dashboard's launch both ask this before anything is recorded, so
    neither leaves a job that its supervisor then refuses to start (docs/claims.md)."""
    check_claims_known(view, ignore=ignore, advice=unknown_advice)
    in_the_way = claims_in_the_way(view, snapshot, targets, uid)
    if in_the_way and not ignore and not wait:
        raise ClaimedCards(f"Nothing was launched: {'; '.join(in_the_way)}. {advice}")
    return in_the_way


def job_cards(
    snapshot: Snapshot | None, indices: Sequence[int], uuids: Sequence[str]
) -> list[Card]:
    """The cards a job is pinned to, as claims name them: by the UUIDs recorded at launch,
    with their MIG relations where ``snapshot`` gives them."""
    by_index = {gpu.physical_index: gpu for gpu in snapshot.gpus} if snapshot else {}
    cards = []
    for position, index in enumerate(indices):
        uuid = uuids[position] if position < len(uuids) else ""
        gpu = by_index.get(index)
        if uuid.startswith("MIG-"):
            parent = (gpu.uuid,) if gpu is not None and gpu.uuid else ()
            cards.append(Card(uuid, index, f"GPU {index} ({uuid})", parent))
            continue
        uuid = uuid or (gpu.uuid if gpu is not None and gpu.uuid else "")
        if uuid:
            mig = tuple(m.uuid for m in gpu.mig_devices if m.uuid) if gpu is not None else ()
            cards.append(Card(uuid, index, f"GPU {index}", mig))
    return cards


class JobClaim:
    """The claim one running job holds, from its supervisor."""

    def __init__(self, job_id: int, environ: Mapping[str, str]) -> None:
        self.job_id = job_id
        self.environ = environ
        self.held = False
        self._renewed = 0.0

    def take(self, cards: Sequence[Card], name: str) -> str | None:
        """Claim the cards for the job; why not, where another user holds one (None when
        taken, or when claims are not set up here)."""
        if not cards:
            return None
        try:
            book = ClaimBook.open(self.environ)
        except UnsafeClaimsDir:
            return None  # said by gputop run; claims are not used
        if book is None:
            return None
        with book:
            try:
                book.claim(cards, JOB_CLAIM_S, note=name[:80], job=self.job_id)
            except ClaimRefused as error:
                return str(error)
            except ClaimsUnreadable as error:  # which cards are claimed cannot be told
                return f"{error} Launch with --ignore-claims to run it anyway."
        self.held = True
        self._renewed = time.monotonic()
        return None

    def renew(self) -> str | None:
        """Renew it when due; a problem, for the job's log."""
        if not self.held or time.monotonic() - self._renewed < RENEW_AFTER_S:
            return None
        self._renewed = time.monotonic()
        try:
            book = ClaimBook.open(self.environ)
            if book is None:
                self.held = False
                return "the claims directory is gone: the job's cards are no longer claimed"
            with book:
                book.extend(None, JOB_CLAIM_S, job=self.job_id)  # in place through a flood
        except GputopError as error:
            return f"the job's claim could not be renewed: {error}"
        except OSError as error:
            return f"the job's claim could not be renewed: {error.strerror or error}"
        except Exception as error:  # a supervisor in trouble still supervises (and obeys stop)
            return f"the job's claim could not be renewed: {type(error).__name__}: {error}"
        return None

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        try:
            book = ClaimBook.open(self.environ)
        except GputopError:
            return
        if book is not None:
            with book, contextlib.suppress(Exception):  # it ends by itself in 30 minutes
                book.release(job=self.job_id)
