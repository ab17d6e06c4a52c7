"""The NVML backend: one batched, immutable snapshot of every GPU per call.

The same code runs on the real ``pynvml`` module (nvidia-ml-py) and on gputop's simulated
one, which is what lets the tests, ``make demo`` and the screenshots exercise it. Facts that
never change while the driver is loaded (name, UUID, PCI bus id, totals, maximum clocks,
compute capability) are read once per GPU; everything else is read on every call.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gputop.core.clock_events import throttling, valid_mask
from gputop.core.host_stats import HostStats, read_host_stats
from gputop.core.model import (
    Activity,
    Clocks,
    GpuProcess,
    GpuSample,
    MigDevice,
    ProcessCuda,
    Snapshot,
)
from gputop.core.process_control import current_boot_id
from gputop.core.records import frozen, mutable, replaced
from gputop.core.sampling.activity import ActivitySampler
from gputop.core.sampling.host_processes import HostFacts, HostProcessTable
from gputop.core.sampling.kmsg_xid import bus_key
from gputop.core.sampling.nvml_fields import FieldReader, GpuLostError, attribute_int, convert, text
from gputop.core.sampling.nvml_health import HealthReader, handle_key
from gputop.core.sampling.nvml_processes import (
    NvmlProcess,
    ProcessLister,
    ProcessListing,
    ProcessUtilization,
    read_utilization,
)
from gputop.core.sampling.process_env import CudaEnvironment, CudaViews, DriverAnswer

MIB = 1024 * 1024
PSTATE_UNKNOWN = 32
"""NVML_PSTATE_UNKNOWN: the driver cannot tell the performance state."""
MEMORY_V2_SYMBOL = "nvmlDeviceGetMemoryInfo_v2"


@frozen
class SamplingOptions:
    """What to read beyond the basics.

    PCIe throughput is off by default: each NVML call for it blocks for about 20 ms while the
    driver measures, which would dominate a refresh of eight GPUs.
    """

    pcie_throughput: bool = False
    """Read PCIe throughput on every GPU; without it, only where GPM does not give PCIe
    rates (docs/activity.md)."""
    activity: bool = True
    """Read GPM activity where the GPU has it (gputop/core/sampling/activity.py)."""
    driver_probe: bool = True
    """Ask the driver (a child process that loads libcuda, gputop.core.probes) how each GPU
    process's ``CUDA_VISIBLE_DEVICES`` enumerates, on real GPUs. Off for a job's supervisor
    (gputop.core.jobs.usage_meter), which reads no CUDA view."""
    cuda_views: bool = True
    """Resolve each GPU process's own ``cuda:N`` view from its environment (docs/multi-card.md).
    Off where nothing shows it: the history recorder, a job's usage meter."""
    claims: bool = True
    """Say who claimed each card (docs/claims.md): a few file reads. Off where nothing shows
    it: a job's usage meter."""
    health: bool = True
    """Read ECC, memory repair and link errors (every 10 s) and Xid events (docs/health.md)."""


_GpuReading = tuple[GpuSample, "tuple[NvmlProcess, ...]", "dict[int, ProcessUtilization]"]
"""A GPU's readings, its processes as NVML lists them, and their utilisation."""


@mutable(slots=True)
class _GpuState:
    handle: Any
    static: GpuSample
    lost: bool = False
    no_access: bool = False
    throttled_since: float | None = None


SETTLE_MARGIN_S = 0.01
PCIE_KB = 1000
"""nvmlDeviceGetPcieThroughput answers in KB/s (nvml.h)."""


class NvmlBackend:
    """Reads snapshots from an initialised NVML module (real or simulated).

    Not thread-safe: one sampler thread owns it.
    """

    def __init__(
        self,
        nvml: Any,
        *,
        clock: Callable[[], float] = time.time,
        hostname: str | None = None,
        simulated: str | None = None,
        host_processes: HostProcessTable | None = None,
        options: SamplingOptions | None = None,
        driver_answer: DriverAnswer | None = None,
        activity_clock: Callable[[], float] | None = None,
        host_stats: Callable[[float], HostStats | None] | None = None,
        cuda_sm_counts: Callable[[int], int | None] | None = None,
        kernel_log: str | None = None,
    ) -> None:
        self._nvml = nvml
        self._cuda_sm_counts = cuda_sm_counts
        """A whole GPU's SM count as CUDA gives it, where known without the driver probe:
        simulated GPUs (the scenario's). NVML gives it for MIG devices only."""
        self._host_stats = host_stats or read_host_stats
        """The host line's reading, given the sample's time (simulated on simulated GPUs)."""
        self._driver_answer = driver_answer
        """The driver probe's answers for processes' environments (real GPUs only)."""
        self._reader = FieldReader(nvml)
        self._clock = clock
        self._hostname = hostname or socket.gethostname()
        self._simulated = simulated
        self._boot_id = current_boot_id()  # what its processes' start_ticks count from
        self._host_processes = host_processes or HostProcessTable()
        self._cuda_views = CudaViews()
        """Each process's CUDA view, kept per (environment, card) (process_env.py)."""
        self._options = options or SamplingOptions()
        read = self._reader.read
        self._driver_version = text(read("nvmlSystemGetDriverVersion"))
        # v2 asks libcuda and fails (LIBRARY_NOT_FOUND) in containers without it; v1 answers
        # from the driver's own table, so any failure of v2 falls back to it.
        cuda_version = read("nvmlSystemGetCudaDriverVersion_v2")
        if cuda_version is None:
            cuda_version = read("nvmlSystemGetCudaDriverVersion")
        self._cuda_driver_version = convert(cuda_version, int)
        self._nvml_version = text(read("nvmlSystemGetNVMLVersion"))
        self._processes = ProcessLister(nvml, self._driver_version)
        self._memory_v2 = self._processes.symbols.exports(MEMORY_V2_SYMBOL)
        self._activity = ActivitySampler(nvml, self._reader, activity_clock or time.monotonic)
        self._now = 0.0
        """When the sample in progress began (``clock``): its timestamp."""
        self._health = HealthReader(nvml, self._reader) if self._options.health else None
        self._handle_index: dict[Any, int] = {}
        """A GPU handle's key (nvml_health.handle_key) -> its physical index, for events."""
        count = read("nvmlDeviceGetCount") or 0
        self._gpus = [self._open_gpu(physical_index) for physical_index in range(int(count))]
        if self._health is not None:
            if kernel_log is not None:  # /dev/kmsg on real GPUs (docs/health.md)
                buses = {
                    key: state.static.physical_index
                    for state in self._gpus
                    if (key := bus_key(state.static.pci_bus_id)) is not None
                }
                # first: its records since boot are matched by the event set's queued ones
                self._health.start_kernel_log(kernel_log, buses)
            self._health.start(clock, self._event_gpu)

    @property
    def nvml(self) -> Any:
        """The NVML module in use: ``pynvml``, or a simulated one."""
        return self._nvml

    def close(self) -> None:
        """Release NVML; the backend must not be used afterwards."""
        self._activity.close()
        if self._health is not None:
            self._health.close()
        self._host_processes.close()
        self._reader.read("nvmlShutdown")

    def show_only(self, pids: frozenset[int] | None) -> None:
        """The dashboard shows these processes (None: all of them, e.g. sorted by a host
        column): the others' CPU and memory may be carried over from a recent read, where
        a pidfd proves them the same processes (gputop.core.sampling.host_processes).
        Called from the UI thread; the next sample reads it."""
        self._host_processes.shown = pids

    @property
    def has_activity(self) -> bool:
        """Some GPU answers GPM (docs/activity.md)."""
        return self._activity.any()

    def settle_activity(self) -> None:
        """For a one-shot reading: take a first GPM sample of every GPU and MIG instance and
        wait the 100 ms NVML needs before the next, so the next ``sample`` has figures.
        Nothing happens (no wait) where no GPU has GPM."""
        if not self._activity.any():
            return
        self.sample()
        wait = self._activity.ready_in()
        if wait > 0:
            time.sleep(wait + SETTLE_MARGIN_S)

    @property
    def reader(self) -> FieldReader:
        return self._reader

    @property
    def process_lister(self) -> ProcessLister:
        return self._processes

    def device_handle(self, physical_index: int) -> Any | None:
        """The NVML handle of a card, for a reading beyond the snapshot (nvml_usage.py);
        ``None`` for a card that is lost, refused or not there."""
        if not 0 <= physical_index < len(self._gpus):
            return None
        state = self._gpus[physical_index]
        return None if state.lost or state.no_access else state.handle

    def sample(self) -> Snapshot:
        """Read every GPU once and describe their processes from the host."""
        self._now = self._clock()
        readings = [self._sample_gpu(state) for state in self._gpus]
        pids = {p.pid for _, processes, _ in readings for p in processes}
        facts = self._host_processes.describe(pids)
        view = None
        if self._options.cuda_views:  # each process's cuda:N, made as the process is
            bare = [gpu for gpu, _, _ in readings]
            view = self._cuda_views.views_for(bare, self._driver_version, self._driver_answer)
        gpus = [
            replaced(
                gpu, processes=_gpu_processes(gpu.physical_index, processes, usage, facts, view)
            )
            if processes
            else gpu
            for gpu, processes, usage in readings
        ]
        if self._options.claims:
            from gputop.core.claims.view import attach_claims, read_claims

            gpus = attach_claims(gpus, read_claims())
        try:
            host_stats = self._host_stats(self._now)
        except Exception:  # the host line is a courtesy: it never costs a sample
            host_stats = None
        return Snapshot(
            host=self._hostname,
            driver_version=self._driver_version,
            cuda_driver_version=self._cuda_driver_version,
            nvml_version=self._nvml_version,
            timestamp=self._now,
            gpus=tuple(gpus),
            simulated=self._simulated,
            host_stats=host_stats,
            boot_id=self._boot_id,
        )

    # -- one GPU -------------------------------------------------------------------------

    def _open_gpu(self, physical_index: int) -> _GpuState:
        # A lost or refused GPU is only marked: an exception would take every other card
        # with it. NO_PERMISSION for the handle is a device cgroup or container hiding the
        # card: it is there, but neither NVML nor CUDA in this process may use it.
        unknown = GpuSample(physical_index, uuid=None, name=None, pci_bus_id=None)
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(physical_index)
        except nvml.NVMLError_NoPermission:
            refused = replace(unknown, no_access=True, processes_listed=False)
            return _GpuState(None, refused, no_access=True)
        except Exception:  # GPU_IS_LOST, or anything else: this card only
            return _GpuState(None, unknown, lost=True)
        try:
            state = _GpuState(handle, self._static_facts(physical_index, handle))
            if self._options.activity:
                self._activity.open_gpu(physical_index, handle)
            if self._health is not None:
                self._handle_index[handle_key(handle)] = physical_index
                self._health.open_gpu(physical_index, handle)
            return state
        except GpuLostError:
            return _GpuState(None, unknown, lost=True)
        except Exception as error:  # a binding bug must not hide other cards
            return _GpuState(handle, replace(unknown, sample_error=_describe(error)))

    def _static_facts(self, physical_index: int, handle: Any) -> GpuSample:
        read = self._reader.read
        pci = read("nvmlDeviceGetPciInfo", handle)
        memory = self._memory(handle)
        # nvmlDeviceGetAttributes answers for MIG devices only (NOT_SUPPORTED on a whole GPU,
        # whatever nvml.h suggests); it is asked anyway, for drivers that do answer.
        attributes = self._reader.read_first(
            ("nvmlDeviceGetAttributes_v2", "nvmlDeviceGetAttributes"), handle
        )
        capability = read("nvmlDeviceGetCudaComputeCapability", handle)
        return GpuSample(
            physical_index=physical_index,
            uuid=text(read("nvmlDeviceGetUUID", handle)),
            name=text(read("nvmlDeviceGetName", handle)),
            pci_bus_id=text(pci.busId) if pci is not None else None,
            serial=text(read("nvmlDeviceGetSerial", handle)),
            memory_total_bytes=attribute_int(memory, "total"),
            max_clocks=self._clocks("nvmlDeviceGetMaxClockInfo", handle),
            compute_capability=convert(capability, lambda c: (int(c[0]), int(c[1]))),
            multiprocessor_count=attribute_int(attributes, "multiprocessorCount")
            or (self._cuda_sm_counts(physical_index) if self._cuda_sm_counts else None),
            nvlink_count=self._nvlink_count(handle),
        )

    def _sample_gpu(self, state: _GpuState) -> _GpuReading:
        if state.no_access:
            return state.static, (), {}
        if not state.lost:
            try:
                return self._dynamic_facts(state)
            except GpuLostError:
                state.lost = True
            except Exception as error:  # this GPU fails, not the sample
                return replace(state.static, sample_error=_describe(error)), (), {}
        health = self._health.last(state.static.physical_index) if self._health else None
        return replace(state.static, lost=True, health=health), (), {}

    def _dynamic_facts(self, state: _GpuState) -> _GpuReading:
        nvml, read = self._nvml, self._reader.read
        handle = state.handle
        memory = self._memory(handle)
        utilization = read("nvmlDeviceGetUtilizationRates", handle)
        power_mw = read("nvmlDeviceGetPowerUsage", handle)
        limit_mw = self._reader.read_first(
            ("nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"), handle
        )
        mig_mode = read("nvmlDeviceGetMigMode", handle)
        mig_current = bool(mig_mode[0]) if mig_mode is not None else None
        mig_devices, mig_handles = self._mig_devices(handle) if mig_current else ((), [])
        encoder = read("nvmlDeviceGetEncoderUtilization", handle)
        decoder = read("nvmlDeviceGetDecoderUtilization", handle)
        bar1 = read("nvmlDeviceGetBAR1MemoryInfo", handle)
        listing: ProcessListing = self._processes.list_gpu(handle, mig_devices, mig_handles)
        processes = listing.processes
        usage: dict[int, ProcessUtilization] = {}
        if processes:
            usage = read_utilization(
                self._reader,
                handle,
                (p.pid for p in processes),
                self._clock(),
                self._processes.symbols,
            )
        index = state.static.physical_index
        activity = self._activity.gpu(index)
        if mig_devices and activity.gpm:
            # one reading per GPU instance: its compute instances share it
            instances = {
                gi: self._activity.instance(index, handle, gi)
                for gi in dict.fromkeys(m.gpu_instance_id for m in mig_devices)
                if gi is not None
            }
            mig_devices = tuple(
                replace(mig, activity=instances[mig.gpu_instance_id])
                if mig.gpu_instance_id is not None
                else mig
                for mig in mig_devices
            )
        pcie_tx, pcie_rx = self._pcie_both(handle, activity)
        if not activity.gpm and (pcie_tx is not None or pcie_rx is not None):
            activity = Activity(
                pcie_tx_bytes_per_s=None if pcie_tx is None else float(pcie_tx * PCIE_KB),
                pcie_rx_bytes_per_s=None if pcie_rx is None else float(pcie_rx * PCIE_KB),
            )
        mask = valid_mask(
            self._reader.read_first(
                (
                    "nvmlDeviceGetCurrentClocksEventReasons",
                    "nvmlDeviceGetCurrentClocksThrottleReasons",
                ),
                handle,
            )
        )
        if not throttling(mask):
            state.throttled_since = None
        elif state.throttled_since is None:
            state.throttled_since = self._now
        sample = replaced(
            state.static,
            memory_total_bytes=attribute_int(memory, "total", state.static.memory_total_bytes),
            memory_used_bytes=attribute_int(memory, "used"),
            memory_free_bytes=attribute_int(memory, "free"),
            memory_reserved_bytes=attribute_int(memory, "reserved") if self._memory_v2 else None,
            utilization_gpu_percent=attribute_int(utilization, "gpu"),
            utilization_memory_percent=attribute_int(utilization, "memory"),
            temperature_c=convert(
                self._reader.read_first(
                    ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),
                    handle,
                    nvml.NVML_TEMPERATURE_GPU,
                ),
                int,
            ),
            fan_percent=convert(read("nvmlDeviceGetFanSpeed", handle), int),
            power_w=convert(power_mw, lambda mw: mw / 1000.0),
            power_limit_w=convert(limit_mw, lambda mw: mw / 1000.0),
            clocks=self._clocks("nvmlDeviceGetClockInfo", handle),
            performance_state=convert(read("nvmlDeviceGetPerformanceState", handle), _pstate),
            compute_mode=convert(read("nvmlDeviceGetComputeMode", handle), int),
            persistence_mode=convert(read("nvmlDeviceGetPersistenceMode", handle), bool),
            display_active=convert(read("nvmlDeviceGetDisplayActive", handle), bool),
            mig_mode_current=mig_current,
            mig_mode_pending=bool(mig_mode[1]) if mig_mode is not None else None,
            mig_devices=mig_devices,
            pcie_tx_kbps=pcie_tx,
            pcie_rx_kbps=pcie_rx,
            activity=activity,
            clock_event_mask=mask,
            throttled_since=state.throttled_since,
            throttled_for_s=None
            if state.throttled_since is None
            else max(0.0, self._now - state.throttled_since),
            encoder_util_percent=convert(encoder, lambda e: int(e[0])),
            decoder_util_percent=convert(decoder, lambda d: int(d[0])),
            bar1_total_bytes=attribute_int(bar1, "bar1Total"),
            bar1_used_bytes=attribute_int(bar1, "bar1Used"),
            ecc_uncorrected_volatile=convert(
                read(
                    "nvmlDeviceGetTotalEccErrors",
                    handle,
                    nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                    nvml.NVML_VOLATILE_ECC,
                ),
                int,
            ),
            processes_listed=listing.listed,
            processes_dropped=listing.dropped,
            health=None
            if self._health is None
            else self._health.read(index, handle, self._now, state.static.nvlink_count),
        )
        return sample, processes, usage

    def _event_gpu(self, device: Any) -> int | None:
        """The physical index of the GPU an event names."""
        index = self._handle_index.get(handle_key(device))
        if index is None:
            index = convert(self._reader.read("nvmlDeviceGetIndex", device), int)
        return index

    def _memory(self, handle: Any) -> Any | None:
        """NVML's v2 memory struct where the driver has it ("used" without the memory the
        driver reserves, as nvidia-smi shows it), else v1 (whose "used" includes it)."""
        if self._memory_v2:
            memory = self._reader.read("nvmlDeviceGetMemoryInfo", handle, self._nvml.nvmlMemory_v2)
            if memory is not None:
                return memory
        return self._reader.read("nvmlDeviceGetMemoryInfo", handle)

    def _clocks(self, function: str, handle: Any) -> Clocks:
        nvml, read = self._nvml, self._reader.read
        return Clocks(
            graphics_mhz=convert(read(function, handle, nvml.NVML_CLOCK_GRAPHICS), int),
            sm_mhz=convert(read(function, handle, nvml.NVML_CLOCK_SM), int),
            memory_mhz=convert(read(function, handle, nvml.NVML_CLOCK_MEM), int),
            video_mhz=convert(read(function, handle, nvml.NVML_CLOCK_VIDEO), int),
        )

    def _pcie_both(self, handle: Any, activity: Activity) -> tuple[int | None, int | None]:
        """PCIe TX and RX in KB/s from nvmlDeviceGetPcieThroughput: on every GPU when asked
        for, else only where GPM gives no PCIe rates (each call blocks about 20 ms on real
        hardware while the driver measures: docs/activity.md)."""
        if not self._options.pcie_throughput and (
            not self._options.activity or activity.gpm or self._nvml_has_no_pcie
        ):
            return None, None
        tx = self._pcie(handle, "NVML_PCIE_UTIL_TX_BYTES")
        rx = self._pcie(handle, "NVML_PCIE_UTIL_RX_BYTES")
        return tx, rx

    @property
    def _nvml_has_no_pcie(self) -> bool:
        return not self._reader.has("nvmlDeviceGetPcieThroughput")

    def _pcie(self, handle: Any, counter: str) -> int | None:
        value = self._reader.read(
            "nvmlDeviceGetPcieThroughput", handle, getattr(self._nvml, counter)
        )
        return convert(value, int)

    def _nvlink_count(self, handle: Any) -> int | None:
        """Links as the driver counts them (NVML_FI_DEV_NVLINK_LINK_COUNT): 18 on an H100
        SXM, 12 on an A100, none on a PCIe card; no fixed upper bound is assumed."""
        nvml = self._nvml
        values = self._reader.read(
            "nvmlDeviceGetFieldValues", handle, [nvml.NVML_FI_DEV_NVLINK_LINK_COUNT]
        )
        if not values:
            return None
        return convert(values[0], lambda v: _field_value(nvml, v))

    def _mig_devices(self, handle: Any) -> tuple[tuple[MigDevice, ...], list[Any]]:
        read = self._reader.read
        slots = read("nvmlDeviceGetMaxMigDeviceCount", handle) or 0
        devices: list[MigDevice] = []
        handles: list[Any] = []
        for slot in range(int(slots)):
            mig = read("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
            if mig is None:
                continue
            memory = self._memory(mig)
            attributes = self._reader.read_first(
                ("nvmlDeviceGetAttributes_v2", "nvmlDeviceGetAttributes"), mig
            )
            devices.append(
                MigDevice(
                    mig_index=slot,
                    uuid=text(read("nvmlDeviceGetUUID", mig)),
                    gpu_instance_id=convert(read("nvmlDeviceGetGpuInstanceId", mig), int),
                    compute_instance_id=convert(read("nvmlDeviceGetComputeInstanceId", mig), int),
                    memory_total_bytes=attribute_int(memory, "total"),
                    memory_used_bytes=attribute_int(memory, "used"),
                    multiprocessor_count=attribute_int(attributes, "multiprocessorCount"),
                    name=text(read("nvmlDeviceGetName", mig)),
                )
            )
            handles.append(mig)
        return tuple(devices), handles


def _pstate(value: Any) -> int | None:
    state = int(value)
    return None if state == PSTATE_UNKNOWN else state


def _field_value(nvml: Any, value: Any) -> int | None:
    """The number in one ``nvmlFieldValue_t``, or ``None`` when NVML failed that field."""
    if int(value.nvmlReturn) != nvml.NVML_SUCCESS:
        return None
    member = {
        nvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        nvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
        nvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
    }.get(int(value.valueType))
    return None if member is None else int(getattr(value.value, member))


def _describe(error: Exception) -> str:
    """A short reason for a person: the exception's type and message."""
    message = str(error).strip()
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _gpu_processes(
    physical_index: int,
    processes: tuple[NvmlProcess, ...],
    usage: dict[int, ProcessUtilization],
    facts: dict[int, HostFacts],
    view: Callable[[CudaEnvironment, int], ProcessCuda] | None = None,
) -> tuple[GpuProcess, ...]:
    """NVML's view of each process joined with the host's and, with ``view``, its own CUDA
    view where its environment was read; built once per refresh."""
    result: list[GpuProcess] = []
    add = result.append
    for process in processes:
        pid = process.pid
        util = usage.get(pid)
        fact = facts[pid]
        environment = fact.environment
        # GpuProcess's fields in their order, given by place (200 a refresh on a busy
        # server; by keyword, each call matched 18 names): test_gpu_processes_fields.py
        # holds this to the fields by name.
        add(
            GpuProcess(
                pid,
                physical_index,
                process.type,
                process.used_memory_bytes,
                util.sm_percent if util is not None else None,
                util.memory_percent if util is not None else None,
                process.mig_uuid,
                process.gpu_instance_id,
                process.compute_instance_id,
                fact.origin,
                fact.user,
                fact.command,
                fact.cpu_percent,
                fact.host_memory_bytes,
                fact.start_time,
                fact.hint,
                view(environment, physical_index)
                if view is not None and environment is not None
                else None,
                fact.start_ticks,
            )
        )
    return tuple(result)
