"""``gputop claim``: hold cards for a while, so that nobody else's gputop launches on them; all
or nothing, refused, naming who and until when, where another user holds one (docs/claims.md).
"""

from __future__ import annotations

import argparse
import os
import time

from gputop.cli.arg_types import count
from gputop.cli.claims_common import (
    cards_of,
    claim_duration,
    claim_note,
    named_cards,
    open_book,
    sample,
)
from gputop.core.claims.book import until_text
from gputop.core.claims.files import DEFAULT_FOR_S, Claim
from gputop.core.errors import UsageError
from gputop.core.model import Snapshot
from gputop.core.numbers import strict_json
from gputop.core.safe_text import clean
from gputop.core.units import duration


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "claim",
        parents=[parent],
        help="claim GPUs for a while, so other users' gputop leaves them to you",
        description="Claim GPUs for a while: other users' gputop run, pick and --wait leave "
        "them alone, and every dashboard shows them as yours. All or nothing: refused, naming "
        "who and until when, where another user holds any of them. Claims are cooperative "
        "(docs/claims.md).",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--gpus", metavar="LIST", help="indices, UUID prefixes or MIG instances")
    which.add_argument(
        "-n", "--count", type=count(1, 4096), metavar="N", help="N free, unclaimed GPUs"
    )
    parser.add_argument(
        "--extend",
        action="store_true",
        help="make your claims (all, or those --gpus names) last at least --for from now "
        "(never shorter)",
    )
    parser.add_argument(
        "--for",
        dest="for_s",
        type=claim_duration,
        metavar="DURATION",
        help=f"how long: 90m, 4h, 2d (default {duration(DEFAULT_FOR_S)}, at most 7d)",
    )
    parser.add_argument("--note", type=claim_note, default="", help="a word for the others")
    parser.add_argument("--json", action="store_true", help="print the claims made as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for_s = DEFAULT_FOR_S if args.for_s is None else args.for_s
    if args.extend:
        if args.count is not None:
            raise UsageError("--extend makes your claims last longer: name them with --gpus.")
        if args.note:
            raise UsageError("--note is set when claiming; --extend keeps it.")
        with open_book() as book:
            uuids = None
            if args.gpus is not None:
                uuids = [card.uuid for card in named_cards(args.fake, args.gpus)]
            asked_until = time.time() + for_s
            made = book.extend(uuids, for_s)
        if args.json:
            return _report(made, "Extended", True)
        longer = [claim for claim in made if claim.until <= asked_until + 1]
        kept = [claim for claim in made if claim.until > asked_until + 1]
        _report(longer, "Extended", False)
        why = "; it already lasts longer (gputop release gives it back)"
        return _report(kept, "Kept", False, why)
    if args.gpus is None and args.count is None:
        raise UsageError("Say which GPUs: --gpus LIST or -n N (or --extend).")
    if args.count is not None:
        snapshot = sample(args.fake)
        cards = cards_of(snapshot, _pick(snapshot, args.count))
    else:
        cards = named_cards(args.fake, args.gpus)
    with open_book() as book:
        made = book.claim(cards, for_s, args.note)
    return _report(made, "Claimed", args.json)


def _pick(snapshot: Snapshot, wanted: int) -> list[int]:
    """``-n N``: by pick's rules, other users' claims and this user's jobs' cards excluded."""
    from gputop.cli.pick_command import active_job_gpus, claims_in_the_way
    from gputop.core.claims.view import read_claims
    from gputop.core.free_cards import FreePolicy, pick_free, whole_cards
    from gputop.core.users import current_user

    blocked = claims_in_the_way(snapshot)
    view = read_claims()
    for gpu in snapshot.gpus:  # already this user's: another claim of them would be refused
        mine = view.gpu_claim(gpu)
        if mine is not None and mine.uid == os.geteuid():
            blocked.setdefault(gpu.physical_index, "already claimed by you")
    return pick_free(
        snapshot,
        wanted,
        FreePolicy(),
        current_user(),
        whole_cards(active_job_gpus()),
        claimed=blocked,
    )


def _report(made: list[Claim], verb: str, as_json: bool, why: str = "") -> int:
    if as_json:
        print(strict_json([claim.to_json() for claim in made], indent=2))
        return 0
    now = time.time()
    for claim in made:
        note = f"  ({clean(claim.note)})" if claim.note else ""
        until = until_text(claim.until, now)
        print(f"{verb} GPU {claim.gpu} {clean(claim.uuid)} {until}{note}{why}")
    return 0
