"""``gputop claims``: every live claim on this machine; ``--setup`` makes the directory."""

from __future__ import annotations

import argparse
import os
import sys
import time

from gputop.core import settings
from gputop.core.claims.book import ClaimBook, Doubt, Scan, until_text
from gputop.core.claims.directory import claims_path, set_up, setup_line
from gputop.core.errors import GputopError
from gputop.core.model import Snapshot
from gputop.core.numbers import strict_json
from gputop.core.safe_text import clean


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "claims",
        parents=[parent],
        help="list who claimed which GPU, until when",
        description="Every live claim on this machine: the GPU, its UUID, who, until when, "
        "the note and the gputop job holding it. Root also sees files that are no believable "
        "claim (docs/claims.md).",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print [{"gpu", "uuid", "user", "until", "note", "job", "certain", "reason"}] '
        "(until: epoch seconds; certain false: a file that may be a claim and cannot be "
        "told, reason says why, until the latest it may hold)",
    )
    parser.add_argument(
        "--setup",
        action="store_true",
        help="(root) make the claims directory: root's, mode 1777 "
        f"({settings.CLAIMS_DIR.name}, default {settings.CLAIMS_DIR.default})",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.setup:
        print(set_up(claims_path()))
        return 0
    book = ClaimBook.open()
    if book is None:  # gputop works as without claims, and says so
        path = claims_path()
        print(
            f"gputop: claims are not set up here ({clean(path)} does not exist); an administrator "
            f"makes it with: {setup_line(path)}",
            file=sys.stderr,
        )
        if args.json:
            print("[]")
        return 0
    with book:
        scan = book.scan()
        book.tidy(scan)
    holders = scan.holders()
    live = sorted(holders.values(), key=lambda c: (c.gpu, c.uuid))
    indices = _current_indices(args.fake)
    documents = []
    for claim in live:
        document = claim.to_json()
        document["gpu"] = indices.get(claim.uuid, claim.gpu)
        documents.append({**document, "certain": True, "reason": None})
    doubtful = _doubtful(scan)
    if args.json:
        for doubt in doubtful:  # gputop leaves these cards alone (docs/claims.md)
            documents.append(
                {
                    "gpu": indices.get(doubt.uuid),
                    "uuid": doubt.uuid,
                    "user": doubt.user,
                    "until": doubt.until,
                    "note": "",
                    "job": None,
                    "certain": False,
                    "reason": doubt.reason,
                }
            )
        print(strict_json(documents, indent=2))
    else:
        now = time.time()
        if not documents and not doubtful:
            print("No GPU is claimed.")
        for document in documents:
            job = f"  job {document['job']}" if document["job"] is not None else ""
            note = f"  {clean(document['note'])}" if document["note"] else ""
            print(
                f"GPU {document['gpu']}  {clean(document['uuid'])}  {clean(document['user'])}  "
                f"{until_text(document['until'], now)}{job}{note}"
            )
        for doubt in doubtful:  # gputop leaves these cards alone: say why
            gpu = indices.get(doubt.uuid)
            print(
                f"GPU {'?' if gpu is None else gpu}  {clean(doubt.uuid)}  may be claimed by "
                f"{clean(doubt.user)}: {clean(doubt.reason)}"
            )
    if os.geteuid() == 0 and scan.suspicious:
        print("Files in the claims directory that are no believable claim:", file=sys.stderr)
        for odd in scan.suspicious[:50]:
            print(f"  {odd.text()}", file=sys.stderr)
    return 0


def _doubtful(scan: Scan) -> list[Doubt]:
    """The first file on each card where that is one that cannot be told (docs/claims.md)."""
    found = {}
    for doubt in scan.doubts:
        first = scan.first(doubt.uuid)
        if isinstance(first, Doubt):
            found[first.name] = first
    return sorted(found.values(), key=lambda d: d.uuid)


def _current_indices(fake: str | None) -> dict[str, int]:
    """``{uuid: physical index now}``, GPUs and MIG instances; empty where NVML cannot say."""
    try:
        from gputop.cli.claims_common import sample

        snapshot: Snapshot = sample(fake)
    except GputopError:
        return {}
    found = {}
    for gpu in snapshot.gpus:
        if gpu.uuid:
            found[gpu.uuid] = gpu.physical_index
        for mig in gpu.mig_devices:
            if mig.uuid:
                found[mig.uuid] = gpu.physical_index
    return found
