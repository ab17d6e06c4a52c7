"""The fleet at one moment, built from one refresh's answers (gputop/core/fleet/read.py).

The node states (up, stale, down) and the rule for a free card are docs/fleet.md's ("States",
"Free"). Every number is checked where it enters: not finite, negative or past what a card
can be is unknown (None), never 0. Label values stay raw here; they are cleaned where shown.
"""

from __future__ import annotations

from dataclasses import field

from gputop.core.fleet.card_health import card_verdict
from gputop.core.fleet.queries import (
    ACTIVITY,
    DETAIL_METRICS,
    HEALTH_FLAGS,
    INTERVAL_WINDOW_S,
    LAST_SAMPLE,
    PROCESS_METRICS,
    USER_COUNTS,
)
from gputop.core.free_cards import FreePolicy
from gputop.core.health import OK, Verdict
from gputop.core.numbers import MAX_MEMORY_BYTES, is_ascii_digits, within
from gputop.core.prometheus.client import Sample
from gputop.core.records import mutable

MIB = 1 << 20
MAX_TEMPERATURE_C = 200.0
MAX_POWER_W = 10_000.0
MAX_BYTES_PER_S = 1e13
MAX_COUNT = 1e6
MAX_TIME_S = 1e11
FREE_USED_BYTES = 1 << 30
"""Used memory under which a card with no process can be free."""
DEFAULT_INTERVAL_S = 15.0
"""Prometheus's default scrape interval, where a target's cannot be told."""
STALE_INTERVALS = 3
MIN_EXPORTER_STALE_S = 45.0
"""gputop's exporter samples every 15 s by default: three of them."""
TARGET_LABELS_DROPPED = ("__name__",)


@mutable
class FleetProcess:
    pid: int | None
    user: str | None
    command: str | None
    used_memory_bytes: int | None
    sm_util: float | None
    gputop_job: str | None
    slurm_job: str | None


@mutable
class FleetGpu:
    key: str
    index: int | None = None
    uuid: str | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    utilization_gpu: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    activity: dict[str, float | None] | None = None
    xid: int | None = None
    uncorrected_ecc: int | None = None
    row_remap_pending: bool | None = None
    row_remap_failed: bool | None = None
    retired_pages_pending: bool | None = None
    reported_level: int | None = None
    """``gputop_gpu_health`` (0 ok, 1 warning, 2 critical): gputop's verdict on the node,
    made from every Xid since it started, not only the last one exported."""
    lost: bool | None = None
    sample_error: bool | None = None
    no_access: bool | None = None
    process_count: int | None = None
    idle_held_memory_bytes: int | None = None
    claim_user: str | None = None
    claimed: bool = False
    processes: list[FleetProcess] | None = None
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    free: bool = False
    verdict: Verdict = OK
    """By the core's rules (gputop/core/health.py) on what the series say; set by
    ``build_fleet``."""

    @property
    def unhealthy(self) -> bool:
        """Never free: lost, failing to be read, or critical."""
        return bool(self.lost or self.sample_error or self.verdict.level == "critical")


@mutable
class FleetNode:
    instance: str
    job: str
    up: float | None = None
    """``up``'s value: 1 answering, 0 not, None where Prometheus has no ``up`` for it."""
    scraped_at: float | None = None
    last_up_at: float | None = None
    scrapes: float | None = None
    labels: dict[str, str] = field(default_factory=dict)
    gpus: dict[str, FleetGpu] = field(default_factory=dict)
    hostnames: dict[str, int] = field(default_factory=dict)
    gputop: bool = False
    """gputop's exporter serves this node (its own series are here)."""
    last_sample_at: float | None = None
    users: dict[str, dict[str, float]] = field(default_factory=dict)
    state: str = "up"
    last_seen: float | None = None
    interval_s: float = DEFAULT_INTERVAL_S

    @property
    def host(self) -> str:
        """``Hostname`` as its series say (the most common), else the instance itself (a
        down target is listed by its instance)."""
        if self.hostnames:
            return max(sorted(self.hostnames), key=lambda name: self.hostnames[name])
        return self.instance

    def sorted_gpus(self) -> list[FleetGpu]:
        return sorted(
            self.gpus.values(),
            key=lambda gpu: (gpu.index is None, gpu.index if gpu.index is not None else 0, gpu.key),
        )

    @property
    def free_gpus(self) -> list[FleetGpu]:
        return [gpu for gpu in self.sorted_gpus() if gpu.free]


@mutable
class FleetUser:
    user: str
    memory_used_bytes: float = 0.0
    idle_held_memory_bytes: float | None = None
    gpus: int = 0
    nodes: int = 0


@mutable
class Fleet:
    url: str
    time: float
    nodes: list[FleetNode]
    users: list[FleetUser]
    queries: int
    interval_s: float = DEFAULT_INTERVAL_S
    partial: bool = False
    """Built from the first answers only: the cards' figures (and so free cards) not yet."""
    every_figure: bool = True
    """False: the cards' temperature, power and activity were not read (the dashboard's
    table, which does not show them; ``fill_figures`` adds them for one node)."""
    user_counts: bool = True
    """False: the users' idle memory and GPU counts were not read (the dashboard's table,
    which shows only their memory; ``fill_user_counts`` adds them for the users' view)."""
    passed_over: int = 0
    """Series left out, each larger than a megabyte (its labels: ``Budget.passed_over``)."""
    flooded: dict[tuple[str, str], int] = field(default_factory=dict)
    """Targets (job, instance) left out for sending more than ``MAX_TARGET_SERIES`` series in
    one answer, and how many they had sent when they passed it (``Budget.flooded``)."""

    @property
    def gpu_count(self) -> int:
        return sum(len(node.gpus) for node in self.nodes)

    @property
    def free_count(self) -> int:
        return sum(len(node.free_gpus) for node in self.nodes)

    def count(self, state: str) -> int:
        return sum(1 for node in self.nodes if node.state == state)


def _number(value: float | None, maximum: float) -> float | None:
    """A value the client already found finite and not negative, at most ``maximum``."""
    return value if value is not None and within(value, 0, maximum) else None


def _int(value: float | None, maximum: float) -> int | None:
    checked = _number(value, maximum)
    return int(checked) if checked is not None else None


def _label(labels: dict[str, str], name: str) -> str | None:
    value = labels.get(name)
    return value if value else None  # an empty label is an absent one, as in PromQL


def _node_key(labels: dict[str, str]) -> tuple[str, str]:
    return (labels.get("job", ""), labels.get("instance", ""))


def _card_key(labels: dict[str, str]) -> str:
    return labels.get("UUID") or "gpu" + labels.get("gpu", "")


def _index(text: str | None) -> int | None:
    return int(text) if text is not None and is_ascii_digits(text) and len(text) <= 4 else None


class _Builder:
    def __init__(self, now: float, rule: FreePolicy) -> None:
        self.now = now
        self.rule = rule
        self.nodes: dict[tuple[str, str], FleetNode] = {}
        self._cards: dict[tuple[str, str, str], tuple[FleetNode, FleetGpu]] = {}
        """(job, instance, card key) -> the card and its node: looked up once a series."""
        self._verdicts: dict[tuple[object, ...], Verdict] = {}
        """The core's verdict by what a card's health series say: most cards say the same."""

    def node(self, labels: dict[str, str]) -> FleetNode:
        key = _node_key(labels)
        node = self.nodes.get(key)
        if node is None:
            node = self.nodes[key] = FleetNode(instance=key[1], job=key[0])
        return node

    def targets(self, name: str, samples: list[Sample]) -> None:
        for sample in samples:
            node = self.node(sample.labels)
            if name == "up":
                node.up = _number(sample.value, 1.0)
                node.labels = {
                    k: v for k, v in sample.labels.items() if k not in TARGET_LABELS_DROPPED
                }
            elif name == "scraped":
                node.scraped_at = _number(sample.value, MAX_TIME_S)
            elif name == "last_up":
                node.last_up_at = _number(sample.value, MAX_TIME_S)
            elif name == "scrapes":
                node.scrapes = _number(sample.value, MAX_COUNT)

    def gpu(self, labels: dict[str, str]) -> tuple[FleetNode, FleetGpu]:
        """The card a series is of (and its node); each label it carries that the card
        lacks still read (the first non-empty one), its ``Hostname`` counted."""
        get = labels.get
        job = get("job", "")
        instance = get("instance", "")
        key = get("UUID") or "gpu" + get("gpu", "")  # _card_key, inline: once a series
        found = self._cards.get((job, instance, key))
        if found is None:
            node = self.node(labels)
            gpu = node.gpus.get(key)
            if gpu is None:
                gpu = node.gpus[key] = FleetGpu(key=key)
            found = self._cards[(job, instance, key)] = (node, gpu)
        node, gpu = found
        hostname = get("Hostname")
        if hostname:
            node.hostnames[hostname] = node.hostnames.get(hostname, 0) + 1
        if gpu.index is None:
            gpu.index = _index(get("gpu") or None)
        if gpu.uuid is None:
            gpu.uuid = get("UUID") or None
        if gpu.name is None:
            gpu.name = get("modelName") or None
        if gpu.pci_bus_id is None:
            gpu.pci_bus_id = get("pci_bus_id") or None
        if gpu.driver_version is None:
            gpu.driver_version = get("DCGM_FI_DRIVER_VERSION") or None
        return found

    def cards(self, samples: list[Sample]) -> None:
        simple = _SIMPLE_FIGURES
        for sample in samples:
            labels = sample.labels
            name = labels.get("__name__", "")
            node, gpu = self.gpu(labels)
            value = sample.value
            if name[0:7] == "gputop_":
                node.gputop = True
            elif gpu.pod is None and name[0:12] == "DCGM_FI_DEV_":
                if gpu.namespace is None:
                    gpu.namespace = labels.get("namespace") or None
                if gpu.container is None:
                    gpu.container = labels.get("container") or None
                gpu.pod = labels.get("pod") or None
            figure = simple.get(name)
            if figure is not None:  # the most of them: a number in range, or unknown
                attribute, maximum, scale = figure
                if value is not None and scale != 1:
                    value *= scale
                if value is None or not 0.0 <= value <= maximum:
                    value = None
                elif scale != 1:
                    value = int(value)
                setattr(gpu, attribute, value)
            elif name == "DCGM_FI_DEV_XID_ERRORS":
                gpu.xid = _int(value, MAX_COUNT)
            elif name == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL":
                gpu.uncorrected_ecc = _int(value, 1e15)
            elif name in HEALTH_FLAGS:
                setattr(gpu, HEALTH_FLAGS[name], _flag(value))
            elif name == "gputop_gpu_health":
                level = _int(value, 2.0)
                gpu.reported_level = level if level == value else None
            elif name in ACTIVITY:
                self._activity(gpu, ACTIVITY[name], value)
            elif name in ("gputop_gpu_lost", "gputop_gpu_sample_error", "gputop_gpu_no_access"):
                flag = _number(value, 1.0)
                setattr(gpu, name.removeprefix("gputop_gpu_"), None if flag is None else flag > 0)
            elif name == "gputop_gpu_processes":
                gpu.process_count = _int(value, MAX_COUNT)
            elif name == "gputop_gpu_idle_held_memory_bytes":
                gpu.idle_held_memory_bytes = _int(value, MAX_MEMORY_BYTES)
            elif name == "gputop_gpu_claimed":
                gpu.claimed = True  # a series only while a claim holds the card
                gpu.claim_user = gpu.claim_user or _label(sample.labels, "user")

    @staticmethod
    def _activity(gpu: FleetGpu, key: str, value: float | None) -> None:
        if gpu.activity is None:
            gpu.activity = dict.fromkeys(ACTIVITY.values())
        if key.endswith("_percent"):
            ratio = _number(value, 1.0)
            gpu.activity[key] = ratio * 100.0 if ratio is not None else None
        else:
            gpu.activity[key] = _number(value, MAX_BYTES_PER_S)

    def processes(self, samples: list[Sample]) -> None:
        found: dict[tuple[tuple[str, str], str, str], FleetProcess] = {}
        for sample in samples:
            labels = sample.labels
            node, gpu = self.gpu(labels)
            node.gputop = True
            pid = _label(labels, "pid")
            key = (_node_key(labels), gpu.key, pid or "")
            process = found.get(key)
            if process is None:
                process = found[key] = FleetProcess(
                    pid=int(pid)
                    if pid is not None and is_ascii_digits(pid) and len(pid) < 10
                    else None,
                    user=_label(labels, "user"),
                    command=_label(labels, "command"),
                    used_memory_bytes=None,
                    sm_util=None,
                    gputop_job=_label(labels, "gputop_job"),
                    slurm_job=_label(labels, "slurm_job"),
                )
                if gpu.processes is None:
                    gpu.processes = []
                gpu.processes.append(process)
            if labels.get("__name__") == "gputop_process_memory_used_bytes":
                process.used_memory_bytes = _int(sample.value, MAX_MEMORY_BYTES)
            else:
                process.sm_util = _number(sample.value, 100.0)

    def node_series(self, samples: list[Sample]) -> None:
        for sample in samples:
            node = self.node(sample.labels)
            node.gputop = True
            name = sample.labels.get("__name__", "")
            hostname = _label(sample.labels, "Hostname")
            if hostname is not None:
                node.hostnames.setdefault(hostname, 0)
            if name == "gputop_last_sample_timestamp_seconds":
                node.last_sample_at = _number(sample.value, MAX_TIME_S)
                continue
            _user_figure(node, name, sample)

    def finish(self, partial: bool) -> list[FleetNode]:
        """States, and each card's verdict and freedom (not ``partial``: not known yet)."""
        for node in self.nodes.values():
            self._state(node)
            for gpu in () if partial else node.gpus.values():
                if node.gputop and gpu.processes is None:
                    gpu.processes = []  # gputop's exporter: none exported on this card
                said = (
                    gpu.xid,
                    gpu.uncorrected_ecc,
                    gpu.row_remap_pending,
                    gpu.row_remap_failed,
                    gpu.retired_pages_pending,
                    gpu.reported_level,
                )
                verdict = self._verdicts.get(said)
                if verdict is None:
                    verdict = self._verdicts[said] = card_verdict(gpu)
                gpu.verdict = verdict
                gpu.free = self._free(node, gpu)
        return sorted(self.nodes.values(), key=lambda node: (node.host, node.instance, node.job))

    def _state(self, node: FleetNode) -> None:
        if node.scrapes is not None and node.scrapes >= 2:
            node.interval_s = max(0.1, min(3600.0, INTERVAL_WINDOW_S / (node.scrapes - 1)))
        if node.up is None:
            node.state = "stale"  # no target Prometheus scrapes: nothing says it answers
            node.last_seen = node.last_sample_at
            return
        if node.up < 1:
            node.state = "down"
            node.last_seen = node.last_up_at
            return
        node.last_seen = node.scraped_at
        limit = STALE_INTERVALS * node.interval_s + 1.0
        if node.scraped_at is None or self.now - node.scraped_at > limit:
            node.state = "stale"
        elif node.gputop and (
            node.last_sample_at is None
            or self.now - node.last_sample_at > max(limit, MIN_EXPORTER_STALE_S)
        ):
            node.state = "stale"
            node.last_seen = node.last_sample_at
        else:
            node.state = "up"

    def _free(self, node: FleetNode, gpu: FleetGpu) -> bool:
        rule = self.rule
        if node.state != "up" or gpu.memory_used_bytes is None:
            return False
        if gpu.memory_used_bytes >= FREE_USED_BYTES:
            return False
        if gpu.memory_free_bytes is not None and gpu.memory_free_bytes < rule.min_free_mib * MIB:
            return False
        if gpu.utilization_gpu is None or gpu.utilization_gpu > rule.max_util_percent:
            return False
        if gpu.unhealthy or gpu.no_access or gpu.pod is not None:
            return False
        if node.gputop:
            return not gpu.claimed and not gpu.processes and not gpu.process_count
        return True


def _user_figure(node: FleetNode, name: str, sample: Sample) -> None:
    """One of a user's figures on ``node`` (``gputop_user_*``), range-checked."""
    user = sample.labels.get("user", "")
    figure = name.removeprefix("gputop_user_")
    value = _number(sample.value, MAX_MEMORY_BYTES if "memory" in figure else MAX_COUNT)
    if value is not None:
        node.users.setdefault(user, {})[figure] = value


_SIMPLE_FIGURES: dict[str, tuple[str, float, int]] = {
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", MAX_MEMORY_BYTES, MIB),
    "DCGM_FI_DEV_FB_FREE": ("memory_free_bytes", MAX_MEMORY_BYTES, MIB),
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_gpu", 100.0, 1),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", MAX_TEMPERATURE_C, 1),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", MAX_POWER_W, 1),
}
"""A card's series that are one figure each: its attribute, its largest value, and the
scale of its unit (MiB: a whole number of bytes)."""


def _flag(value: float | None) -> bool | None:
    """A 0 or 1 series; anything else unknown."""
    return None if value not in (0.0, 1.0) else value == 1.0


def build_fleet(
    url: str,
    now: float,
    answers: dict[str, list[Sample]],
    queries: int,
    rule: FreePolicy | None = None,
    partial: bool = False,
    every_figure: bool = True,
) -> Fleet:
    """The fleet ``answers`` (each refresh query's samples, by name) describe at ``now``;
    ``partial`` where some answers are still to come (no card is free then)."""
    builder = _Builder(now, rule or FreePolicy())
    for name in ("up", "scraped", "last_up", "scrapes"):
        builder.targets(name, answers.get(name, []))
    labelled = answers.get("card_labels", [])
    builder.cards([s for s in labelled if s.labels.get("__name__") != LAST_SAMPLE])
    builder.cards(answers.get("cards", []))
    builder.processes(answers.get("processes", []))
    last = [s for s in labelled if s.labels.get("__name__") == LAST_SAMPLE]
    builder.node_series(last + answers.get("nodes", []))
    nodes = builder.finish(partial)
    gpu_jobs = {node.job for node in nodes if node.gpus or node.gputop}
    nodes = [node for node in nodes if node.job in gpu_jobs]  # not Prometheus's own, say
    if not partial:
        _agree_on_shared_cards(nodes)
    for node in nodes:  # the memory total: what dcgm-exporter splits into used and free
        for gpu in node.gpus.values():
            if gpu.memory_used_bytes is not None and gpu.memory_free_bytes is not None:
                gpu.memory_total_bytes = gpu.memory_used_bytes + gpu.memory_free_bytes
    intervals = sorted(node.interval_s for node in nodes if node.scrapes and node.scrapes >= 2)
    # At most Prometheus's default: a few scrapes in the window are as many from a target
    # scraped every 5 s that started seconds ago as from one scraped every 60 s.
    interval = (
        min(intervals[len(intervals) // 2], DEFAULT_INTERVAL_S) if intervals else DEFAULT_INTERVAL_S
    )
    return Fleet(
        url, now, nodes, _users(nodes), queries, interval, partial, every_figure, every_figure
    )


def _agree_on_shared_cards(nodes: list[FleetNode]) -> None:
    """A card several targets report is free only where every one of them finds it free: the
    same ``UUID`` anywhere, or the same index on nodes of one host name. Two exporters on one
    node (dcgm-exporter and gputop's) report its cards twice, and only gputop's sees their
    processes and claims; and any target may name another node's busy cards as free (its
    ``Hostname`` and ``UUID`` labels are its own word), which ``pick`` would print."""
    reports: dict[tuple[object, ...], list[FleetGpu]] = {}
    for node in nodes:
        host = node.host
        for gpu in node.gpus.values():
            if gpu.uuid is not None:
                reports.setdefault(("uuid", gpu.uuid), []).append(gpu)
            if gpu.index is not None:
                reports.setdefault(("index", host, gpu.index), []).append(gpu)
    shared = [cards for cards in reports.values() if len(cards) > 1]
    changed = True
    while changed:  # a card busy by its UUID makes its index's others busy too, and on
        changed = False
        for cards in shared:
            if any(card.free for card in cards) and not all(card.free for card in cards):
                for card in cards:
                    card.free = False
                changed = True


def fill_user_counts(fleet: Fleet, samples: list[Sample]) -> None:
    """The users' ``USER_COUNTS`` (``read_user_counts``) on ``fleet``'s nodes, each
    range-checked as a refresh's are, and its users counted again; series of other
    figures, or of nodes the fleet does not have, are passed over."""
    nodes = {(node.job, node.instance): node for node in fleet.nodes}
    for sample in samples:
        name = sample.labels.get("__name__", "")
        node = nodes.get(_node_key(sample.labels))
        if node is not None and name in USER_COUNTS:
            _user_figure(node, name, sample)
    fleet.users = _users(fleet.nodes)
    fleet.user_counts = True


def fill_figures(node: FleetNode, samples: list[Sample]) -> None:
    """``node``'s cards' figures and processes from ``samples`` (``read_node_figures``:
    the series of ``DETAIL_METRICS`` and ``PROCESS_METRICS``), each range-checked as a
    refresh's are; other nodes' and other cards' series are passed over, and processes
    read before are replaced."""
    builder = _Builder(0.0, FreePolicy())
    for gpu in node.gpus.values():
        builder._cards[(node.job, node.instance, gpu.key)] = (node, gpu)
        gpu.processes = [] if node.gputop else None
    wanted = set(builder._cards)
    mine = [s for s in samples if (*_node_key(s.labels), _card_key(s.labels)) in wanted]
    builder.cards([s for s in mine if s.labels.get("__name__") in DETAIL_METRICS])
    builder.processes([s for s in mine if s.labels.get("__name__") in PROCESS_METRICS])


def _users(nodes: list[FleetNode]) -> list[FleetUser]:
    users: dict[str, FleetUser] = {}
    for node in nodes:
        if node.state != "up":
            continue  # a stale node's figures are old: not who holds what now
        for name, figures in node.users.items():
            if not name:
                continue
            user = users.setdefault(name, FleetUser(name))
            user.memory_used_bytes += figures.get("memory_used_bytes", 0.0)
            idle = figures.get("idle_held_memory_bytes")
            if idle is not None:
                user.idle_held_memory_bytes = (user.idle_held_memory_bytes or 0.0) + idle
            user.gpus += int(figures.get("gpus", 0.0))
            user.nodes += 1
    return sorted(users.values(), key=lambda u: (-u.memory_used_bytes, u.user))
