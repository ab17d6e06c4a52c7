"""The fleet dashboard's two text screens (gputop/tui/fleet/fleet_app.py): a node's cards
and processes, as the lab view shows a host, and the users across the fleet; every label
cleaned, never read as markup."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gputop.core.fleet.fleet_text import age, card_badge, card_cell
from gputop.core.fleet.model import Fleet, FleetNode
from gputop.core.safe_text import clean
from gputop.core.units import human_bytes
from gputop.tui.safe import plain


def node_detail(fleet: Fleet, node: FleetNode, reading: bool = False) -> Text:
    """A node's cards and processes, as the lab view shows a host (cleaned text);
    ``reading``: its cards' temperature, power and processes are on their way (``…``)."""
    text = Text()
    text.append(f"{clean(node.host)}", style="bold")
    seen = "never seen" if node.last_seen is None else f"seen {age(fleet, node)} ago"
    text.append(
        f"  {node.state}, {seen} · {clean(node.instance)} · "
        f"job {clean(node.job)} · {'gputop exporter' if node.gputop else 'dcgm-exporter'}\n"
    )
    for gpu in node.sorted_gpus():
        cell = card_cell(gpu, node, fleet.partial)
        util = "?" if gpu.utilization_gpu is None else f"{gpu.utilization_gpu:.0f}%"
        used = "?" if gpu.memory_used_bytes is None else human_bytes(gpu.memory_used_bytes)
        total = "?" if gpu.memory_total_bytes is None else human_bytes(gpu.memory_total_bytes)
        unknown = "…" if reading else "?"
        temp = unknown if gpu.temperature_c is None else f"{gpu.temperature_c:.0f}C"
        power = unknown if gpu.power_w is None else f"{gpu.power_w:.0f}W"
        index = "?" if gpu.index is None else str(gpu.index)
        held = []
        if gpu.claimed:
            held.append(f"claimed by {clean(gpu.claim_user or '?')}")
        if gpu.pod:
            held.append(f"pod {clean(gpu.namespace or '')}/{clean(gpu.pod)}")
        said = None if fleet.partial else card_badge(gpu)
        if said is not None:
            held.append(said)
        text.append(
            f"GPU {index:>2} [{cell}] {util:>4} {used:>7}/{total:<7} {temp:>5} {power:>5} "
            f"{clean(gpu.name or '')[:24]} {' · '.join(held)}\n"
        )
        for reason in () if fleet.partial else gpu.verdict.reasons:
            text.append(
                f"    {reason.level}: {reason.text}: {reason.action}\n",
                style="red" if reason.level == "critical" else "yellow",
            )
        for process in gpu.processes or []:
            mem = (
                "?" if process.used_memory_bytes is None else human_bytes(process.used_memory_bytes)
            )
            sm = "?" if process.sm_util is None else f"{process.sm_util:.0f}%"
            text.append(
                f"    {process.pid or '?':>7} {clean(process.user or '?')[:12]:<12} {mem:>7} "
                f"{sm:>4} {clean(process.command or '')[:60]}\n",
                style="dim",
            )
    if reading and node.gputop:
        text.append("processes …\n", style="dim")
    if not node.gpus:
        text.append("no series: nothing is known of its cards\n")
    return text


def users_detail(fleet: Fleet, reading: bool = False) -> Text:
    """The users across the fleet; ``reading``: their idle memory and GPU counts are on
    their way (``…``; ``?`` where they were not read)."""
    text = Text()
    text.append("USER             MEMORY  IDLE-HELD  GPUS NODES\n", style="bold")
    unknown = "…" if reading else "?"
    for user in fleet.users:
        idle = (
            unknown
            if user.idle_held_memory_bytes is None
            else human_bytes(int(user.idle_held_memory_bytes))
        )
        gpus = str(user.gpus) if fleet.user_counts else unknown
        text.append(
            f"{clean(user.user)[:14]:<14} {human_bytes(int(user.memory_used_bytes)):>8} {idle:>10} "
            f"{gpus:>5} {user.nodes:>5}\n"
        )
    if not fleet.users:
        text.append("no users: only gputop's exporter exports them (docs/fleet.md)\n")
    return text


class TextScreen(Screen[None]):
    """A node's detail or the users' view: ``escape`` or ``q`` goes back."""

    BINDINGS = [Binding("escape,q", "app.pop_screen", "Back")]

    def __init__(self, title: str, body: Text) -> None:
        super().__init__()
        self._title = title
        self._body = body

    def compose(self) -> ComposeResult:
        yield Static(plain(self._title, style="bold reverse"))
        with VerticalScroll():
            yield Static(self._body, id="text-body")
        yield Static(Text("escape back"))

    def show(self, body: Text) -> None:
        """The body again (a node's figures arrived)."""
        self._body = body
        if self.is_mounted:
            self.query_one("#text-body", Static).update(body)
