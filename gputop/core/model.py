"""The sample model: one immutable picture of the machine per refresh.

Every reading is ``None`` when NVML could not give it (not supported by the board, no
permission, an old driver without the function, or a lost GPU), so that one failing field
never hides the rest. Names carry their unit; "physical" is the NVML / nvidia-smi index and
"logical" is a CUDA ordinal (``cuda:N``).
"""

from __future__ import annotations

import enum
from dataclasses import astuple, field
from typing import TYPE_CHECKING

from gputop.core.records import frozen

if TYPE_CHECKING:
    from gputop.core.host_stats import HostStats


class ProcessType(str, enum.Enum):
    """What NVML says a process does on a GPU (nvidia-smi's "Type" column)."""

    COMPUTE = "C"
    GRAPHICS = "G"
    COMPUTE_GRAPHICS = "C+G"
    MPS_CLIENT = "M+C"
    """A client of the MPS server (nvidia-smi's "M+C"): its work runs in the server's context."""


class ProcessOrigin(str, enum.Enum):
    """Where the host-side facts about a GPU process came from."""

    HOST = "host"
    """A live process on this machine, described by psutil."""
    SIMULATED = "simulated"
    """A process of a simulated GPU, described by its scenario."""
    FOREIGN = "foreign"
    """NVML reports the pid, but no such process is visible here (another PID namespace)."""


@frozen
class Clocks:
    graphics_mhz: int | None = None
    sm_mhz: int | None = None
    memory_mhz: int | None = None
    video_mhz: int | None = None


ACTIVITY_KEYS = (
    "graphics_percent",
    "sm_active_percent",
    "sm_occupancy_percent",
    "tensor_active_percent",
    "dram_active_percent",
    "fp64_percent",
    "fp32_percent",
    "fp16_percent",
    "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s",
    "nvlink_rx_bytes_per_s",
    "nvlink_tx_bytes_per_s",
)
"""The figures of ``Activity``, in the order ``snapshot --json`` writes them (docs/activity.md)."""


@frozen
class Activity:
    """What the SMs, tensor pipes and memory of a GPU or a MIG GPU instance really do, from
    NVML's GPM (Hopper and newer); ``None`` where unknown. Percentages are 0-100 over the
    time between two GPM samples, rates in bytes per second. See docs/activity.md."""

    graphics_percent: float | None = None
    sm_active_percent: float | None = None
    sm_occupancy_percent: float | None = None
    tensor_active_percent: float | None = None
    dram_active_percent: float | None = None
    fp64_percent: float | None = None
    fp32_percent: float | None = None
    fp16_percent: float | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    nvlink_rx_bytes_per_s: float | None = None
    nvlink_tx_bytes_per_s: float | None = None
    gpm: bool = False
    """GPM answers for this GPU or instance; False: "not available on this GPU" (pre-Hopper,
    a driver without GPM, a vGPU profile without it), and only PCIe rates may be known."""
    reused: bool = False
    """The figures are the previous tick's: the tick came sooner than NVML's 100 ms between
    two GPM samples (gputop/core/sampling/activity.py)."""

    def values(self) -> tuple[float | None, ...]:
        """The figures in ``ACTIVITY_KEYS`` order."""
        return tuple(getattr(self, key) for key in ACTIVITY_KEYS)


NO_ACTIVITY = Activity()


@frozen
class MigDevice:
    """One MIG instance of a GPU in MIG mode."""

    mig_index: int
    uuid: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    multiprocessor_count: int | None
    name: str | None = None
    """As NVML names it, with the profile: "NVIDIA A100-SXM4-80GB MIG 3g.40gb"."""
    activity: Activity = NO_ACTIVITY
    """Of its GPU instance (every compute instance of one GPU instance shares it)."""


CUDA_ENVIRONMENT = (
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "RANK", "LOCAL_RANK", "WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
)  # fmt: skip
"""The variables of a process's environment that its ``ProcessCuda`` is made from: read by
the sampler (sampling/process_env.py), given by a simulated process (fake/scenario.py)."""


@frozen
class ProcessCuda:
    """What one process's ``cuda:N`` are, from the environment it was started with
    (gputop.core.sampling.process_env); numbers outside their range are ``None``."""

    visible_devices: str | None
    device_order: str | None
    rank: int | None
    local_rank: int | None
    world_size: int | None
    master_addr: str | None
    master_port: int | None
    run_id: str | None
    """torchelastic's run id (``TORCHELASTIC_RUN_ID``): the same for every rank of one job."""
    devices: tuple[int, ...]
    """Physical indices in ``cuda:N`` order, by gputop's rules."""
    mismatch: bool
    """NVML shows the process on a card that its own CUDA_VISIBLE_DEVICES excludes."""
    devices_from_driver: bool = False
    """``devices`` is the driver probe's enumeration for its environment, not the rules'."""
    unknown: str | None = None
    """Why its view cannot be known (``"environment too large"``: the read of its
    environment was cut before the CUDA variables could be seen whole); ``devices`` is then
    empty and ``mismatch`` false: unknown, never "unset"."""


@frozen
class GpuProcess:
    """A process that holds a context on a GPU, with what the host knows of it."""

    pid: int
    physical_index: int
    type: ProcessType
    used_memory_bytes: int | None
    """``None`` where NVML reports no per-process memory (some containers, Windows)."""
    sm_util_percent: int | None = None
    memory_util_percent: int | None = None
    mig_uuid: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    origin: ProcessOrigin = ProcessOrigin.HOST
    user: str | None = None
    command: tuple[str, ...] = ()
    cpu_percent: float | None = None
    host_memory_bytes: int | None = None
    start_time: float | None = None
    """Seconds since the epoch."""
    hint: str | None = None
    """Why user and command are missing, for a person (e.g. another PID namespace)."""
    cuda: ProcessCuda | None = None
    """The process's own CUDA view, where its environment could be read."""
    start_ticks: int | None = None
    """When it started, in clock ticks since this machine booted (``/proc/PID/stat``): what
    proves its pid still names it when it is signalled, whatever the wall clock did since
    ``start_time`` was read (process_control.py). ``None`` off this machine or off Linux."""


@frozen
class GpuClaim:
    """Who claimed a GPU, until when (docs/claims.md)."""

    user: str
    until: float
    """Epoch seconds."""
    note: str = ""
    job: int | None = None
    """The gputop job holding the claim, or ``None`` for a person's."""
    doubt: str | None = None
    """Why it may be a claim and cannot be told (a file of ``user``'s that cannot be read or
    believed: ``run`` refuses the card all the same), ``until`` the latest it may hold;
    ``None`` for a believable claim."""


@frozen
class EccCounts:
    """ECC error counts (nvmlDeviceGetTotalEccErrors); each ``None`` where NVML does not give
    it. Volatile counts start again when the driver loads, aggregate ones last the board's
    life (docs/health.md)."""

    corrected_volatile: int | None = None
    uncorrected_volatile: int | None = None
    corrected_aggregate: int | None = None
    uncorrected_aggregate: int | None = None

    def known(self) -> bool:
        return any(v is not None for v in self.values())

    def values(self) -> tuple[int | None, ...]:
        return astuple(self)


@frozen
class RetiredPages:
    """Pages of memory retired by cause, and whether some wait for the next driver load
    (pre-Ampere data-centre boards; docs/health.md)."""

    single_bit: int | None = None
    """Retired for multiple single-bit (corrected) errors."""
    double_bit: int | None = None
    """Retired for a double-bit (uncorrected) error."""
    pending: bool | None = None

    def known(self) -> bool:
        return any(v is not None for v in (self.single_bit, self.double_bit, self.pending))


@frozen
class RemappedRows:
    """Memory rows remapped to spares (Ampere and newer; nvmlDeviceGetRemappedRows)."""

    correctable: int
    uncorrectable: int
    pending: bool
    """A remap waits for a GPU reset to take effect."""
    failed: bool
    """A remap failed: no spare row was left."""


@frozen
class XidEvent:
    """One Xid the driver reported for a GPU (gputop/core/xid.py names the codes)."""

    xid: int
    time: float
    """Epoch seconds when gputop received it (the first of a coalesced run)."""
    count: int = 1
    """How many of this Xid arrived in a row, coalesced into this one event."""


@frozen
class GpuHealth:
    """The signs that a card is failing (docs/health.md); ``None`` where the card or the
    driver does not have the signal, never 0 for "unknown"."""

    ecc: EccCounts | None = None
    retired_pages: RetiredPages | None = None
    remapped_rows: RemappedRows | None = None
    pcie_replays: int | None = None
    nvlink_crc_errors: int | None = None
    """CRC (flit) errors summed over the active NVLink links."""
    xid_events: tuple[XidEvent, ...] | None = None
    """Recent Xids, oldest first; ``None`` where no Xid source is open to this process (not
    "no Xid")."""
    xid_sources: tuple[str, ...] = ()
    """Where Xids are read from: ``"nvml events"``, ``"kernel log"``; none: unknown."""
    xid_counts: tuple[tuple[int, int], ...] = ()
    """Every Xid counted since gputop started (from the kernel log: since boot), as
    (code, count), by code."""
    refused: tuple[str, ...] = ()
    """NVML calls this user may not make (NO_PERMISSION), and a kernel log it may not read,
    so their readings are unknown."""
    read_at: float | None = None
    """Epoch seconds of the counters' reading (they are read less often than a sample)."""


@frozen
class GpuSample:
    """One GPU as one sample read it (``Snapshot.gpus``)."""

    physical_index: int
    uuid: str | None
    name: str | None
    pci_bus_id: str | None
    lost: bool = False
    no_access: bool = False
    """NVML refused a handle for this GPU (NO_PERMISSION, as under device cgroups): it exists,
    but this process may not use it, and CUDA will not number it."""
    sample_error: str | None = None
    """Why this refresh of the GPU failed unexpectedly (readings from the last good static facts
    only); ``None`` when it was read normally."""
    serial: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    """Set aside by the driver and firmware; NVML's v2 memory call reports it apart from "used"
    (``None`` on drivers with only the v1 call, whose "used" includes it)."""
    utilization_gpu_percent: int | None = None
    utilization_memory_percent: int | None = None
    temperature_c: int | None = None
    fan_percent: int | None = None
    """Of the fan's rated speed: may exceed 100 on boards whose fans run above it."""
    power_w: float | None = None
    power_limit_w: float | None = None
    clocks: Clocks = field(default_factory=Clocks)
    max_clocks: Clocks = field(default_factory=Clocks)
    performance_state: int | None = None
    """0 (P0, most power) to 15; ``None`` also when NVML says 32 (unknown)."""
    compute_mode: int | None = None
    persistence_mode: bool | None = None
    display_active: bool | None = None
    compute_capability: tuple[int, int] | None = None
    multiprocessor_count: int | None = None
    mig_mode_current: bool | None = None
    mig_mode_pending: bool | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    pcie_tx_kbps: int | None = None
    pcie_rx_kbps: int | None = None
    encoder_util_percent: int | None = None
    decoder_util_percent: int | None = None
    bar1_total_bytes: int | None = None
    bar1_used_bytes: int | None = None
    ecc_uncorrected_volatile: int | None = None
    nvlink_count: int | None = None
    activity: Activity = NO_ACTIVITY
    clock_event_mask: int | None = None
    """NVML's clock event (throttle) reasons, a bit mask (gputop/core/clock_events.py);
    ``None`` where the driver does not say."""
    throttled_since: float | None = None
    """Epoch seconds since when a throttling reason (power cap, thermal, hardware slowdown)
    has held without a break, as gputop saw it; ``None`` when none holds."""
    throttled_for_s: float | None = None
    """How long that is at this sample's time (for the card's badge)."""
    processes: tuple[GpuProcess, ...] = ()
    processes_listed: bool = True
    """False when NVML would not list this GPU's processes: "unknown", not "none"."""
    processes_dropped: int = 0
    """Entries NVML listed with an impossible pid (0, or 2**31 and above: a struct layout the
    driver and gputop disagree on), left out of ``processes``."""
    claim: GpuClaim | None = None
    """Who holds the card by a claim (docs/claims.md); ``None``: unclaimed, or claims not set
    up here."""
    unclaimed_users: tuple[str, ...] = ()
    """Users whose processes run here without a claim of theirs, while claims are in use."""
    health: GpuHealth | None = None
    """ECC, retired pages, remapped rows, link errors and Xids (docs/health.md); ``None``
    where not read (a lost or refused card, a reader that does not ask)."""

    @property
    def short_uuid(self) -> str | None:
        """``GPU-xxxxxxxx``: enough to tell cards apart and to paste into CUDA_VISIBLE_DEVICES."""
        if self.uuid is None:
            return None
        return self.uuid[:12]


@frozen
class Snapshot:
    """Everything gputop knows about the machine at one moment."""

    host: str
    driver_version: str | None
    cuda_driver_version: int | None
    """As NVML gives it: 12040 means CUDA 12.4."""
    nvml_version: str | None
    timestamp: float
    """Seconds since the epoch."""
    gpus: tuple[GpuSample, ...]
    simulated: str | None = None
    """The scenario's description when the GPUs are simulated; ``None`` on real hardware."""
    host_stats: HostStats | None = None
    """CPU load, memory, swap and uptime (gputop.core.host_stats); ``None`` where unread."""
    boot_id: str | None = None
    """The machine's boot id (``/proc/sys/kernel/random/boot_id``): its processes'
    ``start_ticks`` count from that boot. ``None`` off Linux, simulated, or from an older
    gputop's snapshot."""

    @property
    def cuda_driver_version_text(self) -> str | None:
        if self.cuda_driver_version is None:
            return None
        major, minor = divmod(self.cuda_driver_version, 1000)
        return f"{major}.{minor // 10}"
