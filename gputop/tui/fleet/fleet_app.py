"""``gputop --prometheus URL``: the fleet dashboard, one line per node, read from Prometheus.

A worker thread reads the fleet (gputop/core/fleet/read.py: a few queries, one deadline) at
the scrape interval Prometheus reports for its targets (15 s when unknown) and posts it; the
UI thread only draws. The source is injectable (any callable giving a ``Fleet``), so tests
drive the dashboard with fleets made by hand. Its keys: ``FLEET_KEY_HELP`` (``l`` launches
over ssh: fleet_launch.py). ``--group-by LABEL`` groups the nodes under a line per group.
Every label is cleaned and never read as markup (gputop/tui/safe.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.driver import Driver
from textual.message import Message
from textual.widgets import DataTable, Input, Static
from textual.worker import get_current_worker

from gputop.core.errors import GputopError
from gputop.core.fleet.fleet_json import node_groups
from gputop.core.fleet.fleet_text import (
    LEGEND,
    age,
    card_cell,
    header,
    holders,
    memory,
    node_badge,
)
from gputop.core.fleet.model import Fleet, FleetNode, fill_figures, fill_user_counts
from gputop.core.prometheus.client import Sample
from gputop.core.records import mutable
from gputop.core.safe_text import clean
from gputop.tui.collector import SETTLE_AFTER_S, settle_collector
from gputop.tui.fleet.fleet_views import TextScreen, node_detail, users_detail
from gputop.tui.row_order import HeldOrder, Margin
from gputop.tui.safe import plain
from gputop.tui.screens.help import HelpScreen
from gputop.tui.suspend import SUSPEND_BINDING, SuspendsToShell
from gputop.tui.textual_compat import (
    QUIT_HINT_BINDING,
    InOrderInput,
    LinuxDriver,
    QuietInput,
    QuitHint,
)

SORTS = ("free", "name", "utilisation")
NODE_CHARS = 18
USERS_CHARS = 16
"""At 80 columns a node's line fits whole with 8 cards (enter shows all of it)."""
EARLY_PAINT_WAIT_S = 1.0
MIN_REFRESH_S = 1.0
MAX_REFRESH_S = 300.0
STATE_STYLES = {"up": "green", "stale": "yellow", "down": "red"}
COLUMNS = ("NODE", "STATE", "AGE", "FREE", "CARDS", "MEMORY", "USERS")
KEYS = "s sort  / filter  enter node  l launch  u users  r refresh  ? keys  q quit"
FLEET_KEY_HELP: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "Nodes",
        [
            ("↑/↓ pgup/pgdn", "move the highlight across the nodes"),
            ("enter", "the highlighted node's cards and processes (escape or q: back)"),
            ("s", "next sort: free cards first, by name, by utilisation"),
            ("o", "sort again now (by utilisation a node moves only 10 points past another)"),
            ("/", "show only nodes with some text (a host, a user, a pod, a model, a state)"),
            ("escape", "clear the filter"),
            ("l", "launch on the node's free cards over ssh (else: what to run)"),
            ("u", "the users across the fleet, and what they hold"),
        ],
    ),
    (
        "Views",
        [
            ("r", "read the fleet again now (it is read again by itself every scrape)"),
            ("?", "this help"),
            ("ctrl+z", "suspend to the shell; fg resumes, the screen redrawn whole"),
            ("q", "quit"),
        ],
    ),
]
"""The fleet dashboard's keys, for its help screen (``?``)."""


@mutable
class FleetRead(Message):
    fleet: Fleet | None
    error: str | None
    early: bool = False
    painted: threading.Event | None = None


def mean_util(node: FleetNode) -> float:
    known = [gpu.utilization_gpu for gpu in node.gpus.values() if gpu.utilization_gpu is not None]
    return sum(known) / len(known) if known else -1.0


UTIL_MARGIN = Margin(absolute=10.0)
"""A node passes another by utilisation only when its mean is 10 points more (docs/fleet.md):
means that move a few points every scrape keep their places (the process table's rule,
docs/reference.md)."""


def sorted_nodes(
    nodes: list[FleetNode], sort: str, held: HeldOrder | None = None
) -> list[FleetNode]:
    """The nodes in ``sort``'s order; by utilisation held (``held``: the table's last order)
    so that a node moves only when its mean is clearly above its neighbour's."""
    if sort == "name":
        return sorted(nodes, key=lambda n: (n.host, n.instance))
    if sort == "utilisation":
        by_name = sorted(nodes, key=lambda n: (n.host, n.instance))
        if held is None:
            return sorted(by_name, key=lambda n: -mean_util(n))
        keyed = {(n.job, n.instance): n for n in by_name}
        values = {
            key: (1 if mean_util(n) >= 0 else 0, max(mean_util(n), 0.0)) for key, n in keyed.items()
        }
        kept = held.order(values, UTIL_MARGIN, descending=True, how=("utilisation",))
        return [keyed[key] for key in kept]
    order = {"up": 0, "stale": 1, "down": 2}
    return sorted(nodes, key=lambda n: (-len(n.free_gpus), order[n.state], n.host, n.instance))


def matches(node: FleetNode, needle: str) -> bool:
    if not needle:
        return True
    haystack = " ".join(
        [node.host, node.instance, node.state, holders(node)]
        + [gpu.name or "" for gpu in node.gpus.values()]
    )
    return needle.lower() in clean(haystack).lower()


Show = Callable[[list[Sample] | None, str | None], None]
"""Draws what a worker read for a screen opened on the fleet (None: the error says why)."""


@mutable
class DetailRead(Message):
    """A node's temperature, power and activity, or the users' idle memory and GPU counts,
    read when their screen opened (``samples`` None: ``error`` says why), for ``show``."""

    show: Show
    samples: list[Sample] | None
    error: str | None


@mutable
class LaunchChecked(Message):
    """``l``: whether the node is launched on over ssh, and how the ssh config's reading was
    cut (``fleet_launch.launch_check``, read in a worker thread), for its screen."""

    node: FleetNode
    now: float
    checked: tuple[bool, str]


class FleetApp(QuitHint, SuspendsToShell, App[int]):
    QUIT_WORDS = "q to quit"  # ctrl+c: Textual named ctrl+q, with markup
    CSS = """
    #fleet-header { height: 1; }
    #fleet-filter { height: 3; display: none; }
    #fleet-nodes { height: 1fr; }
    #fleet-keys { height: 1; }
    #fleet-legend { height: 1; color: $text-muted; }
    """
    BINDINGS = [
        SUSPEND_BINDING,
        QUIT_HINT_BINDING,
        Binding("q", "quit", "Quit"),
        Binding("s", "sort", "Sort"),
        Binding("o", "resort", "Re-sort", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("u", "users", "Users"),
        Binding("l", "launch", "Launch"),
        Binding("r", "read_fleet", "Refresh"),
        Binding("question_mark", "help", "Keys"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def __init__(
        self,
        source: Callable[[], Fleet],
        url: str,
        group_by: str | None = None,
        progressive: Callable[[Callable[[Fleet], None]], Fleet] | None = None,
        tune_collector: bool = False,
        node_figures: Callable[[FleetNode], list[Sample]] | None = None,
        user_counts: Callable[[], list[Sample]] | None = None,
    ) -> None:
        """``progressive``: a source that also gives the fleet as its first answers show it
        (``read_fleet``'s ``early``); used for the first read, so the first frame comes
        before the cards' figures. ``tune_collector``: gputop's own process only, as the
        local dashboard's (gputop/tui/collector.py): each refresh makes some 100,000 objects,
        and Python's default collector walked them 50 times a refresh. ``node_figures``:
        reads a node's cards' temperature, power and activity when its screen opens, for a
        source that does not read them every refresh (``Fleet.every_figure``).
        ``user_counts``: reads the users' idle memory and GPU counts when the users' view
        opens, for a source that does not read them every refresh (``Fleet.user_counts``)."""
        super().__init__()
        self.user_counts = user_counts
        self.node_figures = node_figures
        self._tune_collector = tune_collector
        self.progressive = progressive
        self.group_by = group_by
        self.source = source
        self.url = url
        self.fleet: Fleet | None = None
        self.error: str | None = None
        self.sort = SORTS[0]
        self._held = HeldOrder()
        """The table's last order by utilisation (``o`` or ``s`` sorts it exactly again)."""
        self.needle = ""
        self._shown: list[FleetNode | None] = []
        """The table's rows: a node, or None for a group's line."""
        self._rows: list[tuple[str, tuple[Text, ...]]] = []
        """Each row's key and cells as last written: a refresh rewrites only what changed."""
        self._lines: dict[str, tuple[tuple[str, ...], tuple[Text, ...]]] = {}
        """Each node's line as last said (``_said``) and its cells: made again only when it
        says something else."""
        self._head: Text | None = None
        """The header as last written: written again only when it changes (an update lays
        the screen out and paints it again)."""

    def compose(self) -> ComposeResult:
        yield Static(Text(f"reading {clean(self.url)} ..."), id="fleet-header")
        yield InOrderInput(placeholder="filter: host, user, pod, model, state", id="fleet-filter")
        table: DataTable[Text] = DataTable(id="fleet-nodes", cursor_type="row", zebra_stripes=False)
        yield table
        yield Static(Text(LEGEND.removeprefix("cards: ")), id="fleet-legend")
        yield Static(Text(KEYS), id="fleet-keys")

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, its input thread asleep while idle (``QuietInput``): the one
        ctrl+z stops with its whole job, as the dashboard's."""
        driver = super().get_driver_class()
        return QuietInput if driver is LinuxDriver else driver

    def on_mount(self) -> None:
        # Resumed after ctrl+z (fg): the terminal shows what the shell left.
        self.app_resume_signal.subscribe(self, lambda _app: self.screen.refresh())
        table = self.query_one("#fleet-nodes", DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)
        table.focus()
        self.action_read_fleet()
        if self._tune_collector:
            self.set_timer(SETTLE_AFTER_S, settle_collector)

    def action_read_fleet(self) -> None:
        self.run_worker(self._read, thread=True, exclusive=True, group="fleet")

    def _read(self) -> None:
        try:
            if self.progressive is not None and self.fleet is None:
                fleet = self.progressive(self._early)
            else:
                fleet = self.source()
        except GputopError as error:
            self.post_message(FleetRead(None, str(error)))
            return
        self.post_message(FleetRead(fleet, None))

    def _early(self, fleet: Fleet) -> None:
        """The first answers: drawn before the big ones are read and decoded (that decoding
        holds the interpreter and would delay the frame), so this waits until it is painted
        (a second at most)."""
        painted = threading.Event()
        self.post_message(FleetRead(fleet, None, early=True, painted=painted))
        painted.wait(EARLY_PAINT_WAIT_S)

    def on_fleet_read(self, message: FleetRead) -> None:
        if message.early:  # the first answers: drawn, the rest of the read goes on
            if self.fleet is None and message.fleet is not None:
                self.fleet = message.fleet
                self.redraw()
            if message.painted is not None:
                self.call_after_refresh(message.painted.set)
            return
        if message.fleet is not None:
            self.fleet = message.fleet
            self.error = None
        else:
            self.error = message.error
        interval = self.fleet.interval_s if self.fleet is not None else 15.0
        self.set_timer(min(MAX_REFRESH_S, max(MIN_REFRESH_S, interval)), self.action_read_fleet)
        self.redraw()

    def redraw(self) -> None:
        head = self.query_one("#fleet-header", Static)
        line = Text()
        if self.fleet is not None:
            line.append(header(self.fleet), style="bold")
            line.append(f" · sort {self.sort}")
            if self.needle:
                line.append(f" · filter {clean(self.needle)}")
        if self.error is not None:
            line.append(("  " if self.fleet else "") + clean(self.error), style="red")
        if self._head is None or line != self._head:
            head.update(line)
            self._head = line
        self._fill()

    def _fill(self) -> None:
        table = self.query_one("#fleet-nodes", DataTable)
        fleet = self.fleet
        if fleet is None:
            return
        keep = None
        if 0 <= table.cursor_row < len(self._shown):
            kept = self._shown[table.cursor_row]
            keep = (kept.job, kept.instance) if kept is not None else None
        nodes = [
            n for n in sorted_nodes(fleet.nodes, self.sort, self._held) if matches(n, self.needle)
        ]
        shown: list[FleetNode | None] = []
        rows: list[tuple[str, tuple[Text, ...]]] = []
        lines: dict[str, tuple[tuple[str, ...], tuple[Text, ...]]] = {}
        for name, members in node_groups(nodes, self.group_by):
            if name is not None:
                free = sum(len(node.free_gpus) for node in members)
                label = plain(f"{self.group_by}={name}"[:NODE_CHARS], style="bold")
                heading = (label, Text(f"{len(members)} nodes"), Text(""), Text(f"{free}"))
                rows.append((f"group\0{name}", heading + (Text(""),) * 3))
                shown.append(None)
            for node in members:
                key = f"node\0{node.job}\0{node.instance}"
                said = self._said(fleet, node)
                last = self._lines.get(key)
                made = last[1] if last is not None and last[0] == said else self._made(said)
                lines[key] = (said, made)
                rows.append((key, made))
                shown.append(node)
        if [key for key, _ in rows] == [key for key, _ in self._rows]:
            # The same lines in the same order (most refreshes): only the cells that changed
            # are written, so the table neither measures nor renders the others again.
            for (key, cells), (_, was) in zip(rows, self._rows, strict=True):
                if cells is was:
                    continue  # the line says what it said: its very cells again
                for column, new, old in zip(COLUMNS, cells, was, strict=True):
                    if new is not old and new != old:
                        wider = new.cell_len > old.cell_len
                        table.update_cell(key, column, new, update_width=wider)
        else:
            table.clear()
            for key, cells in rows:
                table.add_row(*cells, key=key)
            for row, each in enumerate(shown):
                if each is not None and (each.job, each.instance) == keep:
                    table.move_cursor(row=row)
                    break
        self._rows = rows
        self._lines = lines
        self._shown = shown

    @staticmethod
    def _said(fleet: Fleet, node: FleetNode) -> tuple[str, ...]:
        """What a node's line says, as plain strings (its host not yet cleaned): compared
        with the last refresh's before any cell is made (most lines say the same)."""
        gpus = node.sorted_gpus()
        partial = fleet.partial
        cells = "".join(card_cell(gpu, node, partial) for gpu in gpus)
        free = "?" if partial else str(sum(1 for gpu in gpus if gpu.free))
        health = None if partial else node_badge(node)
        return (
            node.host[:NODE_CHARS],
            node.state,
            age(fleet, node),
            f"{free}/{len(gpus)}",
            cells,
            memory(node),
            holders(node),  # cleaned by holders()
            health or "",
        )

    @staticmethod
    def _made(said: tuple[str, ...]) -> tuple[Text, ...]:
        """A node's cells from what its line says (``_said``)."""
        host, state, seen, free, cells, used, holding, health = said
        users = Text(holding)
        if health:  # the worst card's badge before the users
            style = "red" if health.startswith("✖") else "yellow"
            users = Text.assemble((health, style), " ", users)
        users.truncate(USERS_CHARS)
        return (
            plain(host),
            Text(state, style=STATE_STYLES.get(state, "")),
            Text(seen),
            Text(free),
            Text(cells),
            Text(used),
            users,
        )

    def _current(self) -> FleetNode | None:
        row = self.query_one("#fleet-nodes", DataTable).cursor_row
        return self._shown[row] if 0 <= row < len(self._shown) else None

    def action_launch(self) -> None:
        node = self._current()
        if node is None or self.fleet is None:
            return
        from gputop.tui.fleet.fleet_launch import launch_check  # the lab's dialog, for l only

        now = self.fleet.time

        def work() -> None:
            """hosts.toml, the ssh config and what it includes: files read, globs walked."""
            checked = launch_check(node)
            if not get_current_worker().is_cancelled:
                self.post_message(LaunchChecked(node, now, checked))

        self.run_worker(work, thread=True, exclusive=True, group="fleet-launch")

    def on_launch_checked(self, message: LaunchChecked) -> None:
        from gputop.tui.fleet.fleet_launch import launch_screen

        node = message.node
        shown = launch_screen(node, message.now, checked=message.checked)
        if isinstance(shown, Text):
            self.push_screen(TextScreen(f"launch on {node.host}", shown))
        else:
            self.push_screen(shown)

    def action_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self._held.resort()
        self.redraw()

    def action_resort(self) -> None:
        self._held.resort()
        self.redraw()

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.value = ""
        box.display = False
        self.needle = ""
        self.query_one("#fleet-nodes", DataTable).focus()
        self.redraw()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.needle = event.value
        self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#fleet-nodes", DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if self.fleet is None or not 0 <= event.cursor_row < len(self._shown):
            return
        node = self._shown[event.cursor_row]
        if node is None:  # a group's line
            return
        fleet, figures = self.fleet, self.node_figures
        reading = not fleet.every_figure and figures is not None and bool(node.gpus)
        screen = TextScreen(f"{node.host} ({node.state})", node_detail(fleet, node, reading))
        self.push_screen(screen)

        def show(samples: list[Sample] | None, error: str | None) -> None:
            """Put on its cards here, on the UI thread, and its screen drawn again (its
            fleet, not a newer one: the screen shows the node as it was opened)."""
            if samples is not None:
                fill_figures(node, samples)
            body = node_detail(fleet, node)
            if error is not None:
                body.append(f"temperature and power: {clean(error)}\n", style="red")
            screen.show(body)

        if reading and figures is not None:
            self._read_detail(lambda: figures(node), show)

    def action_users(self) -> None:
        fleet, counts = self.fleet, self.user_counts
        if fleet is None:
            return
        reading = not fleet.user_counts and counts is not None
        screen = TextScreen("users across the fleet", users_detail(fleet, reading))
        self.push_screen(screen)

        def show(samples: list[Sample] | None, error: str | None) -> None:
            """Put on the fleet here, on the UI thread (the one the view was opened on),
            and the view drawn again."""
            if samples is not None and not fleet.user_counts:
                fill_user_counts(fleet, samples)
            body = users_detail(fleet)
            if error is not None:
                body.append(f"idle memory and GPUs: {clean(error)}\n", style="red")
            screen.show(body)

        if reading and counts is not None:
            self._read_detail(counts, show)

    def _read_detail(self, read: Callable[[], list[Sample]], show: Show) -> None:
        """``read`` in a worker thread, and what it found to ``show`` on the UI thread."""

        def work() -> None:
            try:
                self.post_message(DetailRead(show, read(), None))
            except GputopError as error:
                self.post_message(DetailRead(show, None, str(error)))

        self.run_worker(work, thread=True, group="fleet-detail")

    def on_detail_read(self, message: DetailRead) -> None:
        message.show(message.samples, message.error)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(FLEET_KEY_HELP))
