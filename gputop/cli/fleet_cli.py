"""``gputop snapshot --prometheus`` and ``gputop pick --prometheus``: the fleet from the
Prometheus server a cluster already runs (docs/fleet.md).

Every label value is text from other machines: it passes the one sanitiser
(``safe_text.clean``) before it reaches the terminal; the JSON is ASCII (escaped).
"""

from __future__ import annotations

import argparse
import math

from gputop.core.errors import GputopError, UsageError
from gputop.core.fleet.fleet_json import fleet_to_json, node_group
from gputop.core.fleet.model import Fleet, FleetGpu, FleetNode, FreeRule
from gputop.core.fleet.queries import check_selector
from gputop.core.fleet.read import MAX_TIMEOUT_S, read_fleet
from gputop.core.numbers import strict_json
from gputop.core.prometheus.auth import Server
from gputop.core.safe_text import clean
from gputop.core.units import human_bytes

MAX_USERS_SHOWN = 3


class NoNodeFits(GputopError):
    exit_code = 1


def fleet_timeout(args: argparse.Namespace) -> float:
    timeout = args.timeout
    if not isinstance(timeout, float) or not math.isfinite(timeout) or not timeout > 0:
        raise UsageError(f"--timeout {timeout}: give seconds, more than 0.")
    return min(timeout, MAX_TIMEOUT_S)


def load(args: argparse.Namespace, server: Server, rule: FreeRule | None = None) -> Fleet:
    return read_fleet(server, check_selector(args.match), fleet_timeout(args), rule)


def run_snapshot(args: argparse.Namespace, server: Server, width: int | None) -> int:
    group_by = args.group_by
    if group_by is not None and not group_by.replace("_", "a").isalnum():
        raise UsageError(f"--group-by {group_by[:80]!r}: give a label name, e.g. cluster.")
    fleet = load(args, server)
    if args.json:
        print(strict_json(fleet_to_json(fleet, group_by), indent=2))
    else:
        print(render_fleet(fleet, width, group_by))
    return 0


def header(fleet: Fleet) -> str:
    return (
        f"{len(fleet.nodes)} nodes · {fleet.gpu_count} GPUs · {fleet.free_count} free · "
        f"{fleet.count('down')} down · {fleet.count('stale')} stale"
    )


def card_cell(gpu: FleetGpu, node: FleetNode) -> str:
    """One character per card: F free, C claimed, ! unhealthy, a digit busy (utilisation in
    tens of percent, 9 for 90 % and more), ? unknown, - on a node that is not up."""
    if node.state != "up":
        return "-"
    if gpu.unhealthy:
        return "!"
    if gpu.free:
        return "F"
    if gpu.claimed:
        return "C"
    if gpu.utilization_gpu is None:
        return "?"
    return str(min(9, int(gpu.utilization_gpu // 10)))


def age(fleet: Fleet, node: FleetNode) -> str:
    if node.last_seen is None:
        return "never"
    seconds = max(0.0, fleet.time - node.last_seen)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def holders(node: FleetNode) -> str:
    """Its users by memory (gputop's exporter), else the pods on its cards."""
    users = sorted(
        ((figures.get("memory_used_bytes", 0.0), name) for name, figures in node.users.items()),
        reverse=True,
    )
    names = [clean(name) for _, name in users if name]
    if not names:
        names = sorted({clean(gpu.pod) for gpu in node.gpus.values() if gpu.pod})
    shown = ",".join(names[:MAX_USERS_SHOWN])
    return shown + (f",+{len(names) - MAX_USERS_SHOWN}" if len(names) > MAX_USERS_SHOWN else "")


def memory(node: FleetNode) -> str:
    used = [gpu.memory_used_bytes for gpu in node.gpus.values()]
    total = [gpu.memory_total_bytes for gpu in node.gpus.values()]
    if not used or any(v is None for v in used) or any(v is None for v in total):
        return "?"
    return f"{human_bytes(sum(v or 0 for v in used))}/{human_bytes(sum(v or 0 for v in total))}"


def node_line(fleet: Fleet, node: FleetNode, width: int | None) -> str:
    cells = "".join(card_cell(gpu, node) for gpu in node.sorted_gpus())
    line = (
        f"{clean(node.host)[:24]:<24} {node.state:<5} {age(fleet, node):>5} "
        f"{len(node.free_gpus):>2}/{len(node.gpus):<2} [{cells}] {memory(node):>15} "
        f"{holders(node)}"
    )
    return line if width is None else line[:width]


def render_fleet(fleet: Fleet, width: int | None, group_by: str | None = None) -> str:
    lines = [header(fleet), f"{'NODE':<24} STATE   AGE FREE CARDS"]
    if group_by is None:
        lines += [node_line(fleet, node, width) for node in fleet.nodes]
    else:
        groups: dict[str, list[FleetNode]] = {}
        for node in fleet.nodes:
            groups.setdefault(node_group(node, group_by) or "(none)", []).append(node)
        for name in sorted(groups):
            members = groups[name]
            free = sum(len(node.free_gpus) for node in members)
            lines.append(f"{clean(group_by)}={clean(name)}: {len(members)} nodes, {free} free")
            lines += [node_line(fleet, node, width) for node in members]
    lines.append("cards: F free, C claimed, ! unhealthy, 0-9 busy (tens of %), ? unknown")
    return "\n".join(lines)


def run_pick(args: argparse.Namespace, server: Server) -> int:
    rule = FreeRule(min_free_mib=args.min_free_mib, max_util_percent=args.max_util)
    fleet = load(args, server, rule)
    wanted = args.count
    fitting = [node for node in fleet.nodes if len(node.free_gpus) >= wanted]
    if not fitting:
        raise NoNodeFits(_why_none(fleet, wanted))
    # The fullest fit keeps bigger holes for bigger requests; then by name, for the same
    # answer twice.
    node = min(fitting, key=lambda n: (len(n.free_gpus), n.host, n.instance))
    cards = node.free_gpus[:wanted]
    names = [gpu.uuid or str(gpu.index) for gpu in cards]
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
