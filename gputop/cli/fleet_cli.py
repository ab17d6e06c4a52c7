"""``gputop snapshot --prometheus`` and ``gputop pick --prometheus``: the fleet from the
Prometheus server a cluster already runs (docs/fleet.md).

Every label value is text from other machines: it passes the one sanitiser
(``safe_text.clean``) before it reaches the terminal; the JSON is ASCII (escaped).
"""

from __future__ import annotations

import argparse
import math
import re

from gputop.core.errors import GputopError, UsageError
from gputop.core.fleet import TIMEOUT_S
from gputop.core.fleet.fleet_json import fleet_to_json
from gputop.core.fleet.fleet_text import render_fleet
from gputop.core.fleet.model import Fleet, FleetGpu
from gputop.core.fleet.queries import check_selector
from gputop.core.fleet.read import MAX_TIMEOUT_S, read_fleet
from gputop.core.free_cards import FreePolicy
from gputop.core.numbers import strict_json
from gputop.core.prometheus.auth import Server
from gputop.core.safe_text import clean


class NoNodeFits(GputopError):
    exit_code = 1


def fleet_timeout(args: argparse.Namespace) -> float:
    """``--timeout`` for one read of the fleet: as given, else the fleet's one default."""
    timeout = TIMEOUT_S if args.timeout is None else args.timeout
    if not isinstance(timeout, float) or not math.isfinite(timeout) or not timeout > 0:
        raise UsageError(f"--timeout {timeout}: give seconds, more than 0.")
    return min(timeout, MAX_TIMEOUT_S)


def load(args: argparse.Namespace, server: Server, rule: FreePolicy | None = None) -> Fleet:
    return read_fleet(server, check_selector(args.match), fleet_timeout(args), rule)


def run_snapshot(args: argparse.Namespace, server: Server, width: int | None) -> int:
    group_by = args.group_by
    fleet = load(args, server)
    if args.json:
        print(strict_json(fleet_to_json(fleet, group_by), indent=2))
    else:
        print(render_fleet(fleet, width, group_by))
    return 0


def run_pick(args: argparse.Namespace, server: Server) -> int:
    rule = FreePolicy(min_free_mib=args.min_free_mib, max_util_percent=args.max_util)
    fleet = load(args, server, rule)
    wanted = args.count
    free = [(node, [gpu for gpu in node.free_gpus if _device(gpu)]) for node in fleet.nodes]
    fitting = [(node, cards) for node, cards in free if len(cards) >= wanted]
    if not fitting:
        raise NoNodeFits(_why_none(fleet, wanted))
    # The fullest fit keeps bigger holes for bigger requests; then by name, for the same
    # answer twice.
    node, cards = min(fitting, key=lambda fit: (len(fit[1]), fit[0].host, fit[0].instance))
    cards = cards[:wanted]
    names = [_device(gpu) or "" for gpu in cards]
    if args.json:
        document = {
            "host": node.host,
            "instance": node.instance,
            "uuids": [gpu.uuid for gpu in cards],
            "indices": [gpu.index for gpu in cards],
            "cuda_visible_devices": ",".join(names),
        }
        print(strict_json(document))
    else:
        print(f"{clean(node.host)} {clean(','.join(names))}")
    return 0


_UUID = re.compile(r"(?:GPU|MIG)-[0-9A-Za-z/-]{1,200}")


def _device(gpu: FleetGpu) -> str | None:
    """How ``CUDA_VISIBLE_DEVICES`` names the card: its ``UUID`` where it is one, else its
    index. The labels are the target's word: a ``UUID`` of ``0`` or ``1,2`` named other
    cards than the one judged free (``None``: a card that cannot be named is not picked)."""
    if gpu.uuid is not None and _UUID.fullmatch(gpu.uuid):
        return gpu.uuid
    return None if gpu.index is None else str(gpu.index)


def _why_none(fleet: Fleet, wanted: int) -> str:
    up = [node for node in fleet.nodes if node.state == "up"]
    most = max(up, key=lambda n: (len(n.free_gpus), n.host), default=None)
    said = f"No node has {wanted} free GPU{'s' if wanted != 1 else ''}"
    if most is None or not most.free_gpus:
        said += f": none of the {len(up)} nodes up has a free GPU"
    else:
        said += f": the most on one node is {len(most.free_gpus)} ({clean(most.host)})"
    said += f"; {fleet.count('down')} down and {fleet.count('stale')} stale nodes not counted"
    return said + " (a free GPU: under 1 GiB used, no process, claim or pod; docs/fleet.md)."
