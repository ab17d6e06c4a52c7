"""``gputop release [--gpus LIST]``: give back your claims (default: all of them)."""

from __future__ import annotations

import argparse

from gputop.cli.claims_common import named_cards, open_book
from gputop.core.safe_text import clean


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "release",
        parents=[parent],
        help="give back your GPU claims",
        description="Give back your claims on these GPUs (default: all of yours). Claims "
        "your running gputop jobs hold stay until the jobs end. Another user's claim cannot "
        "be released.",
    )
    parser.add_argument("--gpus", metavar="LIST", help="indices, UUID prefixes or MIG instances")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    uuids = None if args.gpus is None else [c.uuid for c in named_cards(args.fake, args.gpus)]
    with open_book() as book:
        gone = book.release(uuids)
    if not gone:
        print("You held no claim" + (" on those GPUs." if uuids else "."))
    for claim in gone:
        print(f"Released GPU {claim.gpu} {clean(claim.uuid)}")
    return 0
