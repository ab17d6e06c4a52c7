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
from dataclasses import dataclass, replace
from typing import Any

from gputop.core.host_processes import HostFacts, HostProcessTable
from gputop.core.model import Clocks, GpuProcess, GpuSample, MigDevice, Snapshot
from gputop.core.nvml_fields import FieldReader, GpuLostError, convert, text
from gputop.core.nvml_processes import (
    NvmlProcess,
    ProcessUtilization,
    ProcessUtilizationTracker,
    list_processes,
)

MIB = 1024 * 1024
NVLINK_MAX_LINKS = 18


@dataclass(frozen=True, slots=True)
class SamplingOptions:
    """What to read beyond the basics.

    PCIe throughput is off by default: each NVML call for it blocks for about 20 ms while the
    driver measures, which would dominate a refresh of eight GPUs.
    """

    pcie_throughput: bool = False


_GpuReading = tuple[GpuSample, "tuple[NvmlProcess, ...]", "dict[int, ProcessUtilization]"]
"""A GPU's readings, its processes as NVML lists them, and their utilisation."""


@dataclass(slots=True)
class _GpuState:
    handle: Any
    static: GpuSample
    lost: bool = False
    utilization: ProcessUtilizationTracker | None = None


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
    ) -> None:
        self._nvml = nvml
        self._reader = FieldReader(nvml)
        self._clock = clock
        self._hostname = hostname or socket.gethostname()
        self._simulated = simulated
        self._host_processes = host_processes or HostProcessTable()
        self._options = options or SamplingOptions()
        read = self._reader.read
        self._driver_version = text(read("nvmlSystemGetDriverVersion"))
        self._cuda_driver_version = convert(
            self._reader.read_first(
                ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")
            ),
            int,
        )
        self._nvml_version = text(read("nvmlSystemGetNVMLVersion"))
        count = read("nvmlDeviceGetCount") or 0
        self._gpus = [self._open_gpu(physical_index) for physical_index in range(int(count))]

    @property
    def nvml(self) -> Any:
        """The NVML module in use: ``pynvml``, or a simulated one."""
        return self._nvml

    @property
    def gpu_count(self) -> int:
        return len(self._gpus)

    def close(self) -> None:
        """Release NVML; the backend must not be used afterwards."""
        self._reader.read("nvmlShutdown")

    def sample(self) -> Snapshot:
        """Read every GPU once and describe their processes from the host."""
        readings = [self._sample_gpu(state) for state in self._gpus]
        pids = {p.pid for _, processes, _ in readings for p in processes}
        facts = self._host_processes.describe(pids)
        gpus = [
            replace(gpu, processes=_gpu_processes(gpu.physical_index, processes, usage, facts))
            if processes
            else gpu
            for gpu, processes, usage in readings
        ]
        return Snapshot(
            host=self._hostname,
            driver_version=self._driver_version,
            cuda_driver_version=self._cuda_driver_version,
            nvml_version=self._nvml_version,
            timestamp=self._clock(),
            gpus=tuple(gpus),
            simulated=self._simulated,
        )

    # -- one GPU -------------------------------------------------------------------------

    def _open_gpu(self, physical_index: int) -> _GpuState:
        # A lost GPU is only marked: an exception would take every other card with it.
        unknown = GpuSample(physical_index, uuid=None, name=None, pci_bus_id=None)
        try:
            handle = self._reader.read("nvmlDeviceGetHandleByIndex", physical_index)
            if handle is None:
                return _GpuState(None, unknown, lost=True)
            return _GpuState(handle, self._static_facts(physical_index, handle))
        except GpuLostError:
            return _GpuState(None, unknown, lost=True)

    def _static_facts(self, physical_index: int, handle: Any) -> GpuSample:
        read = self._reader.read
        pci = read("nvmlDeviceGetPciInfo", handle)
        memory = read("nvmlDeviceGetMemoryInfo", handle)
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
            memory_total_bytes=int(memory.total) if memory is not None else None,
            max_clocks=self._clocks("nvmlDeviceGetMaxClockInfo", handle),
            compute_capability=(int(capability[0]), int(capability[1])) if capability else None,
            multiprocessor_count=(
                int(attributes.multiprocessorCount) if attributes is not None else None
            ),
            nvlink_count=self._nvlink_count(handle),
        )

    def _sample_gpu(self, state: _GpuState) -> _GpuReading:
        if not state.lost:
            try:
                return self._dynamic_facts(state)
            except GpuLostError:
                state.lost = True
        return replace(state.static, lost=True), (), {}

    def _dynamic_facts(self, state: _GpuState) -> _GpuReading:
        nvml, read = self._nvml, self._reader.read
        handle = state.handle
        memory = read("nvmlDeviceGetMemoryInfo", handle)
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
        processes, processes_listed = list_processes(self._reader, handle, mig_devices, mig_handles)
        usage: dict[int, ProcessUtilization] = {}
        if processes:
            if state.utilization is None:
                state.utilization = ProcessUtilizationTracker()
            usage = state.utilization.read(self._reader, handle, (p.pid for p in processes))
        sample = replace(
            state.static,
            memory_total_bytes=_attr_int(memory, "total", state.static.memory_total_bytes),
            memory_used_bytes=_attr_int(memory, "used"),
            memory_free_bytes=_attr_int(memory, "free"),
            utilization_gpu_percent=_attr_int(utilization, "gpu"),
            utilization_memory_percent=_attr_int(utilization, "memory"),
            temperature_c=convert(
                read("nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU), int
            ),
            fan_percent=convert(read("nvmlDeviceGetFanSpeed", handle), int),
            power_w=convert(power_mw, lambda mw: mw / 1000.0),
            power_limit_w=convert(limit_mw, lambda mw: mw / 1000.0),
            clocks=self._clocks("nvmlDeviceGetClockInfo", handle),
            performance_state=convert(read("nvmlDeviceGetPerformanceState", handle), int),
            compute_mode=convert(read("nvmlDeviceGetComputeMode", handle), int),
            persistence_mode=convert(read("nvmlDeviceGetPersistenceMode", handle), bool),
            display_active=convert(read("nvmlDeviceGetDisplayActive", handle), bool),
            mig_mode_current=mig_current,
            mig_mode_pending=bool(mig_mode[1]) if mig_mode is not None else None,
            mig_devices=mig_devices,
            pcie_tx_kbps=self._pcie(handle, "NVML_PCIE_UTIL_TX_BYTES"),
            pcie_rx_kbps=self._pcie(handle, "NVML_PCIE_UTIL_RX_BYTES"),
            encoder_util_percent=int(encoder[0]) if encoder is not None else None,
            decoder_util_percent=int(decoder[0]) if decoder is not None else None,
            bar1_total_bytes=_attr_int(bar1, "bar1Total"),
            bar1_used_bytes=_attr_int(bar1, "bar1Used"),
            ecc_uncorrected_volatile=convert(
                read(
                    "nvmlDeviceGetTotalEccErrors",
                    handle,
                    nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                    nvml.NVML_VOLATILE_ECC,
                ),
                int,
            ),
            processes_listed=processes_listed,
        )
        return sample, processes, usage

    def _clocks(self, function: str, handle: Any) -> Clocks:
        nvml, read = self._nvml, self._reader.read
        return Clocks(
            graphics_mhz=convert(read(function, handle, nvml.NVML_CLOCK_GRAPHICS), int),
            sm_mhz=convert(read(function, handle, nvml.NVML_CLOCK_SM), int),
            memory_mhz=convert(read(function, handle, nvml.NVML_CLOCK_MEM), int),
            video_mhz=convert(read(function, handle, nvml.NVML_CLOCK_VIDEO), int),
        )

    def _pcie(self, handle: Any, counter: str) -> int | None:
        if not self._options.pcie_throughput:
            return None
        value = self._reader.read(
            "nvmlDeviceGetPcieThroughput", handle, getattr(self._nvml, counter)
        )
        return convert(value, int)

    def _nvlink_count(self, handle: Any) -> int | None:
        states = []
        for link in range(NVLINK_MAX_LINKS):
            state = self._reader.read("nvmlDeviceGetNvLinkState", handle, link)
            if state is None:
                break
            states.append(state)
        return sum(1 for state in states if state) if states else None

    def _mig_devices(self, handle: Any) -> tuple[tuple[MigDevice, ...], list[Any]]:
        read = self._reader.read
        slots = read("nvmlDeviceGetMaxMigDeviceCount", handle) or 0
        devices: list[MigDevice] = []
        handles: list[Any] = []
        for slot in range(int(slots)):
            mig = read("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
            if mig is None:
                continue
            memory = read("nvmlDeviceGetMemoryInfo", mig)
            attributes = self._reader.read_first(
                ("nvmlDeviceGetAttributes_v2", "nvmlDeviceGetAttributes"), mig
            )
            devices.append(
                MigDevice(
                    mig_index=slot,
                    uuid=text(read("nvmlDeviceGetUUID", mig)),
                    gpu_instance_id=convert(read("nvmlDeviceGetGpuInstanceId", mig), int),
                    compute_instance_id=convert(read("nvmlDeviceGetComputeInstanceId", mig), int),
                    memory_total_bytes=_attr_int(memory, "total"),
                    memory_used_bytes=_attr_int(memory, "used"),
                    multiprocessor_count=_attr_int(attributes, "multiprocessorCount"),
                    name=text(read("nvmlDeviceGetName", mig)),
                )
            )
            handles.append(mig)
        return tuple(devices), handles


def _attr_int(value: Any | None, name: str, default: int | None = None) -> int | None:
    if value is None:
        return default
    return int(getattr(value, name))


def _gpu_processes(
    physical_index: int,
    processes: tuple[NvmlProcess, ...],
    usage: dict[int, ProcessUtilization],
    facts: dict[int, HostFacts],
) -> tuple[GpuProcess, ...]:
    """NVML's view of each process joined with the host's, built once per refresh."""
    result = []
    for process in processes:
        util = usage.get(process.pid)
        fact = facts[process.pid]
        result.append(
            GpuProcess(
                pid=process.pid,
                physical_index=physical_index,
                type=process.type,
                used_memory_bytes=process.used_memory_bytes,
                sm_util_percent=util.sm_percent if util is not None else None,
                memory_util_percent=util.memory_percent if util is not None else None,
                mig_uuid=process.mig_uuid,
                gpu_instance_id=process.gpu_instance_id,
                compute_instance_id=process.compute_instance_id,
                origin=fact.origin,
                user=fact.user,
                command=fact.command,
                cpu_percent=fact.cpu_percent,
                host_memory_bytes=fact.host_memory_bytes,
                start_time=fact.start_time,
                hint=fact.hint,
            )
        )
    return tuple(result)
