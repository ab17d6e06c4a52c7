"""The parsed form of a scenario file: frozen dataclasses, one per JSON object kind.

Fields keep the scenario's own units (MiB, W, KB/s); the fake NVML converts to NVML's units
at the call, so a test can compare a reading against the number written in the file.
``None`` everywhere means "absent or null in the file", which the fake NVML turns into
``NVMLError_NotSupported``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, fields

from gputop.core.fake.signals import Signal
from gputop.core.records import frozen

DEFAULT_START_TIME = 1767225600.0
"""2026-01-01T00:00:00Z: the epoch time of scenario t=0 when the clock is frozen."""

PROCESS_TYPES = ("C", "G", "C+G", "M+C")
"""Compute, graphics, both, and an MPS client (listed by the MPS call only)."""


def keys_of(kind: type, leaving: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The keys of a scenario object: its dataclass's fields, which are named alike."""
    return tuple(f.name for f in fields(kind) if f.name not in leaving)


@frozen
class ScenarioProcess:
    pid: int
    type: str
    """``"C"``, ``"G"``, ``"C+G"`` or ``"M+C"``."""
    used_memory_mib: Signal | None
    sm_util: Signal | None = None
    mem_util: Signal | None = None
    user: str | None = None
    cmd: tuple[str, ...] = ()
    cpu_percent: Signal | None = None
    host_memory_mib: Signal | None = None
    started_s_ago: float | None = None
    env: tuple[tuple[str, str], ...] = ()
    """The CUDA and launcher variables it was started with (a rank's RANK, WORLD_SIZE...)."""

    @property
    def is_compute(self) -> bool:
        return self.type in ("C", "C+G")

    @property
    def is_graphics(self) -> bool:
        return "G" in self.type

    @property
    def is_mps_client(self) -> bool:
        return self.type == "M+C"


@frozen
class ActivitySignals:
    """What GPM answers for a GPU or MIG instance; an absent signal is that metric's own
    NOT_SUPPORTED."""

    graphics: Signal | None = None
    sm_active: Signal | None = None
    sm_occupancy: Signal | None = None
    tensor_active: Signal | None = None
    dram_active: Signal | None = None
    fp64: Signal | None = None
    fp32: Signal | None = None
    fp16: Signal | None = None
    pcie_tx_mib_s: Signal | None = None
    pcie_rx_mib_s: Signal | None = None
    nvlink_rx_mib_s: Signal | None = None
    nvlink_tx_mib_s: Signal | None = None


ACTIVITY_SIGNALS = keys_of(ActivitySignals)
"""A scenario's ``activity`` keys: percent, then MiB/s, in the order of GPM's metrics
(docs/scenario.md, "Activity")."""


@frozen
class ClockEventWindow:
    """Clock event reasons that hold from ``from_s`` until ``until_s`` (scenario seconds),
    every ``period_s`` when set."""

    mask: int
    from_s: float
    until_s: float
    period_s: float | None = None

    def holds_at(self, t: float) -> bool:
        if self.period_s is not None:
            t = t % self.period_s
        return self.from_s <= t < self.until_s


@frozen
class JobProfile:
    """What a live process pinned to simulated cards shows on each (fake/pinned.py); the
    signals run on the process's age in seconds, not on the scenario clock."""

    used_memory_mib: Signal | None = None
    sm_util: Signal | None = None
    mem_util: Signal | None = None
    activity: ActivitySignals | None = None
    """What GPM answers for a card the job's process is pinned to (a Hopper card only), on
    the oldest such process's age; replaces the card's own ``activity``."""


@frozen
class ClockSignals:
    graphics: Signal | None = None
    sm: Signal | None = None
    mem: Signal | None = None
    video: Signal | None = None


@frozen
class MaxClocks:
    graphics: int | None = None
    sm: int | None = None
    mem: int | None = None
    video: int | None = None


@frozen
class ScenarioMigDevice:
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    memory_total_mib: int | None = None
    memory_used_mib: Signal | None = None
    multiprocessor_count: int | None = None
    profile: str | None = None
    """e.g. ``"3g.40gb"``: names the device (``<GPU name> MIG 3g.40gb``) and its slices."""
    processes: tuple[ScenarioProcess, ...] = ()
    activity: ActivitySignals | None = None
    """GPM's answers for its GPU instance (the first device of an instance gives them)."""

    @property
    def gpu_slice_count(self) -> int | None:
        """The ``3`` of ``3g.40gb``, or ``None`` without a profile."""
        if self.profile is None:
            return None
        head = self.profile.split("g.", 1)[0]
        return int(head) if head.isdigit() else None


@frozen
class ScenarioXid:
    """An Xid the simulated driver reports ``count`` times at scenario time ``at_s``."""

    at_s: float
    xid: int
    count: int = 1


@frozen
class ScenarioHealth:
    """What a simulated card answers to the health calls (fake/health_calls.py); ``None``
    fields take the card kind's default (docs/scenario.md)."""

    ecc_corrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    retired_pages: tuple[int, int, bool] | None = None
    """(single-bit, double-bit, pending)."""
    remapped_rows: tuple[int, int, bool, bool] | None = None
    """(correctable, uncorrectable, pending, failed)."""
    pcie_replays: int | None = None
    nvlink_crc_errors: int | None = None
    """Over all links together."""
    xid_events: tuple[ScenarioXid, ...] = ()


@frozen
class ScenarioGpu:
    name: str
    uuid: str
    pci_bus_id: str | None = None
    serial: str | None = None
    memory_total_mib: int | None = None
    memory_reserved_mib: int | None = None
    """Set aside by the driver: in v1 "used", apart in v2 (absent: 0)."""
    power_limit_w: float | None = None
    max_clocks_mhz: MaxClocks = MaxClocks()
    cuda_compute_capability: tuple[int, int] | None = None
    multiprocessor_count: int | None = None
    performance_state: int | None = None
    persistence_mode: bool | None = None
    display_active: bool | None = None
    compute_mode: int | None = None
    ecc_uncorrected_volatile: int | None = None
    bar1_total_mib: int | None = None
    nvlink_count: int | None = None
    memory_used_mib: Signal | None = None
    utilization_gpu: Signal | None = None
    utilization_memory: Signal | None = None
    temperature_c: Signal | None = None
    power_w: Signal | None = None
    fan_percent: Signal | None = None
    clocks_mhz: ClockSignals = ClockSignals()
    pcie_tx_kbps: Signal | None = None
    pcie_rx_kbps: Signal | None = None
    encoder_util: Signal | None = None
    decoder_util: Signal | None = None
    bar1_used_mib: Signal | None = None
    nvlink_tx_kbps: Signal | None = None
    nvlink_rx_kbps: Signal | None = None
    processes: tuple[ScenarioProcess, ...] = ()
    mig_mode: tuple[int, int] | None = None
    """``(current, pending)``; ``None`` on a board without MIG."""
    mig_devices: tuple[ScenarioMigDevice, ...] = ()
    lost_after_s: float | None = None
    no_permission: frozenset[str] = frozenset()
    function_errors: Mapping[str, int] = field(default_factory=dict)
    """NVML function name -> the NVML error code it returns on this GPU."""
    accounting_mode: bool | None = None
    """The driver's accounting mode; ``None``: the board has none (fake/usage_calls.py)."""
    activity: ActivitySignals | None = None
    """GPM's answers (Hopper and newer only, docs/scenario.md)."""
    clock_event_reasons: tuple[ClockEventWindow, ...] = ()
    """When which clock event (throttle) reasons hold; none: no reason (mask 0)."""
    health: ScenarioHealth = ScenarioHealth()
    """ECC, retired pages, remapped rows, link errors and Xids (fake/health_calls.py)."""


@frozen
class Scenario:
    path: str
    description: str
    gpus: tuple[ScenarioGpu, ...]
    driver_version: str | None = None
    cuda_driver_version: int | None = None
    nvml_version: str | None = None
    hostname: str | None = None
    missing_functions: frozenset[str] = frozenset()
    function_errors: Mapping[str, int] = field(default_factory=dict)
    """NVML function name -> the NVML error code it returns, on every GPU."""
    start_time: float = DEFAULT_START_TIME
    """Epoch seconds of scenario t=0 when the clock is frozen."""
    job_profile: JobProfile | None = None
    """Set: live processes pinned to simulated cards are listed on them (fake/pinned.py)."""
