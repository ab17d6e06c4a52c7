"""``gputop pick``: free cards as a CUDA_VISIBLE_DEVICES value, for scripts.

``export CUDA_VISIBLE_DEVICES=$(gputop pick -n 2)``: stdout carries the value and nothing
else, so the substitution is safe; warnings and the reason nothing fits go to stderr. UUIDs
are the default because an index means another card under CUDA's default fastest-first order
on a machine with mixed models; indices are offered with a warning where that is the case.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

from gputop.cli.arg_types import count
from gputop.cli.claims_common import sample
from gputop.cli.lab_common import add_hosts_arguments
from gputop.cli.prometheus_args import add_fleet_arguments, fleet_server
from gputop.core.errors import GputopError
from gputop.core.free_cards import FreePolicy, pick_free_targets
from gputop.core.mig_targets import target_keys
from gputop.core.model import Snapshot
from gputop.core.numbers import strict_json
from gputop.core.safe_text import clean
from gputop.core.users import current_user
from gputop.core.visibility import cuda_order, pin_environment, resolve_visibility
from gputop.core.visibility.order import PCI_BUS_ID

ORDER = "CUDA_DEVICE_ORDER"
DEFAULTS = FreePolicy()


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "pick",
        parents=[parent],
        help="print free GPUs as a CUDA_VISIBLE_DEVICES value",
        description="Pick free GPUs and print them as a CUDA_VISIBLE_DEVICES value. A GPU is "
        "free with enough free memory, low utilisation, no other user's processes or claim "
        "(docs/claims.md) and no running gputop job; the ones with most free memory win. "
        "Exits 1, saying why, when not enough are free.",
        epilog="Example: export CUDA_VISIBLE_DEVICES=$(gputop pick -n 2)",
    )
    parser.add_argument(
        "-n",
        "--count",
        type=count(1),
        default=1,
        metavar="N",
        help="how many GPUs (default 1)",
    )
    add_free_arguments(parser)
    parser.add_argument(
        "--format",
        choices=("uuid", "index"),
        default="uuid",
        help="UUIDs (default: mean the same card under any CUDA_DEVICE_ORDER) or nvidia-smi "
        f"indices (right only with {ORDER}={PCI_BUS_ID})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print {physical_indices, uuids, cuda_visible_devices} as JSON",
    )
    add_hosts_arguments(parser)
    add_fleet_arguments(parser)
    parser.set_defaults(run=run)


def add_free_arguments(parser: argparse.ArgumentParser) -> None:
    """What a free GPU is, for ``pick`` and ``run --auto``/``--wait`` (the free-card policy)."""
    parser.add_argument(
        "--min-free-mib",
        type=count(0),
        default=DEFAULTS.min_free_mib,
        metavar="M",
        help=f"a free GPU has at least M MiB of free memory (default {DEFAULTS.min_free_mib})",
    )
    parser.add_argument(
        "--max-util",
        type=count(0, 100),
        default=DEFAULTS.max_util_percent,
        metavar="P",
        help=f"a free GPU has at most P %% utilisation (default {DEFAULTS.max_util_percent})",
    )


def run(args: argparse.Namespace) -> int:
    server = fleet_server(args)
    if server is not None:
        from gputop.cli import fleet_cli  # the fleet's modules, only for it

        return fleet_cli.run_pick(args, server)
    if getattr(args, "hosts", None):
        from gputop.cli.lab_pick import run_pick

        return run_pick(args)
    policy = FreePolicy(min_free_mib=args.min_free_mib, max_util_percent=args.max_util)
    snapshot = sample(args.fake)
    picked = pick_free_targets(
        snapshot,
        args.count,
        policy,
        current_user(),
        active_job_gpus(),
        claimed=claims_in_the_way(snapshot),
    )
    pinning = pin_environment(
        snapshot.gpus,
        picked,
        use_uuids=args.format == "uuid",
        driver_version=snapshot.driver_version,
    )
    value = pinning.env["CUDA_VISIBLE_DEVICES"]
    whole = [target for target in picked if isinstance(target, int)]
    if args.format == "index" and whole:  # a MIG instance is named by its UUID either way
        warning = index_order_warning(snapshot, value, whole, os.environ.get(ORDER))
        if warning:
            warn(warning)
    if args.json:
        uuids = [device.mig_uuid or device.uuid for device in pinning.devices]
        indices = [device.physical_index for device in pinning.devices]  # a MIG one's GPU
        document = {"physical_indices": indices, "uuids": uuids, "cuda_visible_devices": value}
        print(strict_json(document))
    else:
        print(clean(value))  # a UUID with control characters is no UUID: never raw
    return 0


def open_job_store() -> Any:
    """The job store, or None where none was ever created; a seam for tests."""
    from gputop.core.jobs.store import JobStore

    return JobStore.open_existing()


def active_job_gpus() -> dict[int, tuple[int | str, ...]]:
    """``{job id: what it holds}`` of gputop jobs still waiting or running: physical
    indices, and the ``MIG-`` UUIDs of MIG instances it is pinned to.

    pick must still work when the store cannot be read (a read-only home, a store written by
    a newer gputop): it says so and picks without knowing about jobs.
    """
    try:
        store = open_job_store()
        if store is None:
            return {}
        try:
            for notice in store.notices:
                warn(notice)
            return {
                job.id: tuple(target_keys(job.physical_indices, job.uuids))
                for job in store.active_jobs()
            }
        finally:
            store.close()
    except (GputopError, OSError, sqlite3.Error) as error:
        warn(f"cannot read gputop's jobs ({error}); GPUs its jobs use may be picked")
        return {}


def claims_in_the_way(snapshot: Snapshot) -> dict[int, str]:
    """``{physical index: why}`` for the cards another user's claim holds (docs/claims.md);
    an unsafe claims directory is said and ignored, a missing one is claims not set up."""
    from gputop.core.claims.view import UNKNOWN, UNSAFE, read_claims

    view = read_claims()
    if view.state == UNSAFE:
        warn(view.message)
    if view.state == UNKNOWN:
        warn(f"{view.message} Other users' claims cannot be told: gputop run will refuse.")
    return view.blocked_cards(snapshot)


def index_order_warning(
    snapshot: Snapshot, value: str, picked: Sequence[int], cuda_device_order: str | None
) -> str | None:
    """Why nvidia-smi indices may name other cards in this shell, or None when they do not."""
    if (cuda_device_order or "").strip() == PCI_BUS_ID:
        return None
    ordering = cuda_order(snapshot.gpus, cuda_device_order)
    in_cuda_order = [gpu.physical_index for gpu in ordering.gpus]
    if in_cuda_order == sorted(in_cuda_order) and ordering.certain:
        return None
    setting = "unset" if cuda_device_order is None else repr(cuda_device_order)
    seen = resolve_visibility(snapshot.gpus, snapshot.driver_version, value, cuda_device_order)
    selected = [device.physical_index for device in seen.devices]
    if selected != list(picked):
        names = {gpu.physical_index: (gpu.name or "?") for gpu in snapshot.gpus}
        cards = ", ".join(f"GPU {i} ({names[i]})" for i in selected) or "no GPU"
        consequence = (
            f"CUDA numbers this machine's GPUs fastest first and would read {value} as {cards}"
        )
    else:
        consequence = (
            "CUDA numbers this machine's differing GPUs by an estimated speed and may read "
            f"{value} as other GPUs"
        )
    return (
        f"{value} uses nvidia-smi's GPU numbers, but {ORDER} is {setting}, so {consequence}. "
        f"Also export {ORDER}={PCI_BUS_ID}, or use --format uuid."
    )


def warn(message: str) -> None:
    print(f"gputop: warning: {clean(message)}", file=sys.stderr)
