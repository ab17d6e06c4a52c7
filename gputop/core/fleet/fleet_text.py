"""The fleet as text: the header, a node's line and the table of ``snapshot --prometheus``,
shared with the fleet dashboard (docs/fleet.md). Every label passes the one sanitiser here."""

from __future__ import annotations

import math

from gputop.core.fleet.fleet_json import node_groups
from gputop.core.fleet.model import Fleet, FleetGpu, FleetNode
from gputop.core.health import badge
from gputop.core.prometheus import answer as prometheus_answer
from gputop.core.safe_text import clean
from gputop.core.units import human_bytes

MAX_USERS_SHOWN = 3
LABEL_SHOWN = 32
"""At most this many characters of a label shown (a user, a pod, a --group-by value): the
text is another machine's, and 100 KB of it made a node's line as long."""
LEGEND = "cards: F free, C claimed, ! critical or lost, w warning, 0-9 busy (tens of %), ? unknown"


def header(fleet: Fleet) -> str:
    free = "reading the cards…" if fleet.partial else f"{fleet.free_count} free"
    line = (
        f"{len(fleet.nodes)} nodes · {fleet.gpu_count} GPUs · {free} · "
        f"{fleet.count('down')} down · {fleet.count('stale')} stale"
    )
    if fleet.passed_over:
        line += f" · {passed_over(fleet.passed_over)}"
    if fleet.flooded:
        line += f" · {flooded(fleet.flooded)}"
    return line


def passed_over(count: int) -> str:
    """What a read left out: series too large to read (``Budget.passed_over``)."""
    return f"{count} series of over 1 MiB passed over"


def flooded(targets: dict[tuple[str, str], int]) -> str:
    """The targets left out of a read for a flood of series (``Budget.flooded``), the first
    by its instance named."""
    (_job, instance), *others = sorted(targets)
    more = f" and {len(others)} more" if others else ""
    name = shown_label(instance) or "a target of no instance"
    bound = prometheus_answer.MAX_TARGET_SERIES  # the decoder's, as it is when said
    return f"{name}{more} left out: over {bound:,} series in one answer"


def card_cell(gpu: FleetGpu, node: FleetNode, partial: bool = False) -> str:
    """One character per card: F free, C claimed, ! critical, lost or failing (never free),
    w a health warning (free or not: the node's line says which), a digit busy (utilisation
    in tens of percent, 9 for 90 % and more), ? unknown, - on a node that is not up, · while
    its figures are still being read (``partial``)."""
    if node.state != "up":
        return "-"
    if partial:
        return "·"
    if gpu.unhealthy:
        return "!"
    if gpu.verdict.level == "warning":
        return "w"
    if gpu.free:
        return "F"
    if gpu.claimed:
        return "C"
    if gpu.utilization_gpu is None:
        return "?"
    return str(min(9, int(gpu.utilization_gpu // 10)))


def age(fleet: Fleet, node: FleetNode) -> str:
    """How long ago the node was last seen. A node up and seen within its scrape interval is
    ``<15s`` (its interval): its exact age only says where in the scrape cycle the read fell,
    and would change every row at every refresh (each row repainted for it)."""
    if node.last_seen is None:
        return "never"
    seconds = max(0.0, fleet.time - node.last_seen)
    if node.state == "up" and seconds <= node.interval_s:
        whole = math.ceil(max(1.0, node.interval_s))  # "<N" is never less than the interval
        return f"<{whole}s" if whole < 120 else f"<{math.ceil(whole / 60)}m"
    return _duration(seconds)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.0f}h"
    days = seconds // 86400
    return f"{days:.0f}d" if days <= 999 else ">999d"  # a clock at 1970: still 5 characters


def shown_label(text: str) -> str:
    """A label for the terminal: sanitised, then cut to ``LABEL_SHOWN`` characters and an
    ellipsis where longer."""
    text = clean(text)
    return text if len(text) <= LABEL_SHOWN else text[:LABEL_SHOWN] + "…"


def holders(node: FleetNode) -> str:
    """Its users by memory (gputop's exporter), else the pods on its cards."""
    users = sorted(
        ((figures.get("memory_used_bytes", 0.0), name) for name, figures in node.users.items()),
        reverse=True,
    )
    names = [shown_label(name) for _, name in users if name]
    if not names:
        names = sorted({shown_label(gpu.pod) for gpu in node.gpus.values() if gpu.pod})
    shown = ",".join(names[:MAX_USERS_SHOWN])
    return shown + (f",+{len(names) - MAX_USERS_SHOWN}" if len(names) > MAX_USERS_SHOWN else "")


def memory(node: FleetNode) -> str:
    used = [gpu.memory_used_bytes for gpu in node.gpus.values()]
    total = [gpu.memory_total_bytes for gpu in node.gpus.values()]
    if not used or any(v is None for v in used) or any(v is None for v in total):
        return "?"
    return f"{human_bytes(sum(v or 0 for v in used))}/{human_bytes(sum(v or 0 for v in total))}"


def card_badge(gpu: FleetGpu) -> str | None:
    """The dashboard's badge on the card (gputop/core/health.py), ``✖ lost`` for a lost card
    with no reason of its own; ``None`` for a card that is ok."""
    if gpu.verdict.reasons:
        return badge(gpu.verdict)
    if gpu.lost:
        return "✖ lost"
    if gpu.sample_error:
        return "✖ not read"
    return None


def node_badge(node: FleetNode) -> str | None:
    """The worst card's badge with its index (critical before warning, then by index) and
    how many other cards are not ok: ``✖ GPU 2 Xid 79 fell off the bus, +1 GPU``."""
    marked = [(gpu, said) for gpu in node.sorted_gpus() if (said := card_badge(gpu)) is not None]
    if not marked:
        return None
    gpu, said = min(marked, key=lambda item: not item[0].unhealthy)  # stable: by index
    index = "?" if gpu.index is None else str(gpu.index)
    line = f"{said[0]} GPU {index}{said[1:]}"
    others = len(marked) - 1
    return line + (f", +{others} GPU{'s' if others > 1 else ''}" if others else "")


def node_line(fleet: Fleet, node: FleetNode, width: int | None) -> str:
    cells = "".join(card_cell(gpu, node, fleet.partial) for gpu in node.sorted_gpus())
    health = None if fleet.partial else node_badge(node)
    line = (
        f"{clean(node.host)[:24]:<24} {node.state:<5} {age(fleet, node):>5} "
        f"{len(node.free_gpus):>2}/{len(node.gpus):<2} [{cells}] {memory(node):>15} "
        + (f"{health} " if health else "")
        + holders(node)
    )
    return line if width is None else line[:width]


def render_fleet(fleet: Fleet, width: int | None, group_by: str | None = None) -> str:
    lines = [header(fleet), f"{'NODE':<24} STATE   AGE FREE CARDS"]
    for name, members in node_groups(fleet.nodes, group_by):
        if group_by is not None and name is not None:
            free = sum(len(node.free_gpus) for node in members)
            group = f"{shown_label(group_by)}={shown_label(name)}"
            lines.append(f"{group}: {len(members)} nodes, {free} free")
        lines += [node_line(fleet, node, width) for node in members]
    lines.append(LEGEND)
    return "\n".join(lines)
