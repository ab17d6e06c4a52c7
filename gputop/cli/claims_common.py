"""What ``claim``, ``claims`` and ``release`` share: their inputs, checked, and the cards
they name (docs/claims.md)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from contextlib import closing

from gputop.cli.arg_types import duration as duration_type
from gputop.core.claims.book import Card, ClaimBook
from gputop.core.claims.directory import claims_path, setup_line
from gputop.core.claims.files import MAX_FOR_S, MAX_NOTE, MIN_FOR_S
from gputop.core.errors import GputopError, UsageError
from gputop.core.mig_targets import mig_target_by_uuid, resolve_gpus
from gputop.core.model import Snapshot
from gputop.core.safe_text import clean
from gputop.core.sampling.source import open_backend
from gputop.core.units import duration


def claim_duration(text: str) -> float:
    """``--for``: 90m, 4h, 2d; one minute to seven days."""
    value = duration_type()(text)
    if not MIN_FOR_S <= value <= MAX_FOR_S:
        raise argparse.ArgumentTypeError(
            f"{clean(text)!r}: a claim lasts from {duration(MIN_FOR_S)} to "
            f"{duration(MAX_FOR_S)}; extend it later with gputop claim --extend"
        )
    return value


def claim_note(text: str) -> str:
    """``--note``: one line of at most 200 characters; control characters are made visible."""
    cleaned = clean(text.strip())
    if len(cleaned) > MAX_NOTE:
        raise argparse.ArgumentTypeError(
            f"the note is {len(cleaned)} characters long; at most {MAX_NOTE}"
        )
    return cleaned


def open_book() -> ClaimBook:
    """The claims directory, or an error saying it is not set up here (and how to)."""
    book = ClaimBook.open()
    if book is None:
        path = claims_path()
        raise GputopError(
            f"Claims are not set up here: {path} does not exist. An administrator makes it "
            f"once with: {setup_line(path)}"
        )
    return book


def sample(fake: str | None, environ: Mapping[str, str] | None = None) -> Snapshot:
    """One sample of this machine's cards (or the simulation's), the backend closed again."""
    with closing(open_backend(fake, environ=environ)) as backend:
        return backend.sample()


def named_cards(fake: str | None, gpus: str) -> list[Card]:
    """The cards ``--gpus`` names, as ``gputop run --gpus`` reads it."""
    snapshot = sample(fake)
    return cards_of(snapshot, resolve_gpus(snapshot, [gpus]))


def cards_of(snapshot: Snapshot, targets: Sequence[int | str]) -> list[Card]:
    """Cards to claim from ``resolve_gpus``'s answer: whole GPUs by index, MIG by UUID."""
    cards = []
    by_index = {gpu.physical_index: gpu for gpu in snapshot.gpus}
    for target in targets:
        if isinstance(target, str):
            found = mig_target_by_uuid(snapshot.gpus, target)
            if found is None or not found.gpu.uuid:
                raise UsageError(f"MIG device {clean(target)} is not on this machine.")
            cards.append(Card(target, found.gpu.physical_index, found.label, (found.gpu.uuid,)))
            continue
        gpu = by_index[target]
        if not gpu.uuid:
            raise GputopError(f"GPU {target} has no UUID (NVML gave none): it cannot be claimed.")
        instances = tuple(m.uuid for m in gpu.mig_devices if m.uuid)
        cards.append(Card(gpu.uuid, target, f"GPU {target}", instances))
    return cards
