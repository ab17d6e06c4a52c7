"""Simulated process calls: running processes, per-process utilisation, host-side facts.

Process utilisation follows the driver's sample buffer: a caller passes the newest
timestamp it has seen and gets only newer samples, or NOT_FOUND when there are none. The
fake takes one sample per second of scenario time; timestamps are epoch microseconds of
the fake clock (``start_time`` + t when frozen), as real ones are epoch microseconds, so
even a clock frozen at t=0 has a sample newer than 0.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import pynvml

from gputop.core.fake.base import MIB, FakeDeviceHandle, nvml_error, nvml_function, nvml_twin
from gputop.core.fake.card_load import CardLoad
from gputop.core.fake.scenario_types import ScenarioProcess
from gputop.core.records import frozen

LOAD_EVERY_S = 5.0
"""How often a Linux kernel recomputes its load averages (``LOAD_FREQ``, 5 s): the simulated
host's load moves as often, not every second."""
LOAD_WINDOWS_S = (60.0, 300.0, 900.0)
"""The load averages' time constants: 1, 5 and 15 minutes."""
LOAD_DECAY = tuple(math.exp(-LOAD_EVERY_S / window) for window in LOAD_WINDOWS_S)
"""What each average keeps of itself at each recomputation (the kernel's ``EXP_1``,
``EXP_5``, ``EXP_15``)."""
LOAD_CATCH_UP_TICKS = 36
"""At most this many recomputations are caught up at once (3 minutes); after a longer gap
(a fast or a stepped clock) the averages start again from the load of the moment."""

SIMULATED_UP_BEFORE_S = 86400.0
"""The simulated machine was up this long before its oldest process started."""


@frozen
class SimulatedProcess:
    """What the host would know about a simulated pid that does not exist here."""

    user: str | None
    command: tuple[str, ...]
    cpu_percent: float | None
    host_memory_bytes: int | None
    start_time: float | None
    """Seconds since the epoch."""
    environment: tuple[tuple[str, str], ...] = ()
    """The watched variables it was started with (the scenario's ``env``)."""


class ProcessCalls(CardLoad):
    """Compute and graphics process lists, process utilisation, simulated host facts."""

    _load: tuple[float, tuple[float, float, float]] | None = None
    """The host's load averages as last worked out: (scenario time, 1, 5 and 15 minutes)."""

    @nvml_function("any")
    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeDeviceHandle) -> list[Any]:
        return self._running(handle, compute=True)

    @nvml_function("any")
    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: FakeDeviceHandle) -> list[Any]:
        return self._running(handle, compute=False)

    nvmlDeviceGetComputeRunningProcesses_v3 = nvml_twin(nvmlDeviceGetComputeRunningProcesses)
    nvmlDeviceGetComputeRunningProcesses_v2 = nvml_twin(nvmlDeviceGetComputeRunningProcesses)
    nvmlDeviceGetGraphicsRunningProcesses_v3 = nvml_twin(nvmlDeviceGetGraphicsRunningProcesses)
    nvmlDeviceGetGraphicsRunningProcesses_v2 = nvml_twin(nvmlDeviceGetGraphicsRunningProcesses)

    @nvml_function("any")
    def nvmlDeviceGetProcessUtilization(
        self, handle: FakeDeviceHandle, last_seen_timestamp: int
    ) -> list[Any]:
        """The newest sample of each process that ran, if newer than ``last_seen``.

        As the driver does, a process appears only if it used the SMs during the sample (an
        idle one is left out), and no sample at all is NOT_FOUND. A GPU where no process has
        ``sm_util`` in the scenario does not measure processes: NOT_SUPPORTED.
        """
        measured = self._measured(handle)
        if not measured:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        sample_t = self.sample_time()
        timestamp_us = round(self._epoch_at(sample_t) * 1_000_000)
        if timestamp_us <= last_seen_timestamp:
            nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        shares = self._time_shares(handle, sample_t)  # the card's time shared out
        active = [(p, shares[(ids, p.pid)]) for p, ids in measured]
        active = [(p, share) for p, share in active if share[0] > 0]
        if not active:
            nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        samples = []
        for process, (sm, memory) in active:
            sample = pynvml.c_nvmlProcessUtilizationSample_t()
            sample.pid = process.pid
            sample.timeStamp = timestamp_us
            sample.smUtil = sm
            sample.memUtil = memory
            sample.encUtil = 0
            sample.decUtil = 0
            samples.append(sample)
        return samples

    def simulated_process(self, pid: int) -> SimulatedProcess | None:
        """Host facts for ``pid`` from the scenario, now; ``None`` if it gives no user or cmd.

        A process with neither is meant to look like one from another PID namespace, so the
        backend shows its hint instead of made-up facts.
        """
        process = self._described_processes.get(pid)
        return self._host_facts(process) if process is not None else None

    def simulated_host_load(self) -> tuple[tuple[float, float, float], list[int]]:
        """The host's load averages over 1, 5 and 15 minutes, and every described
        process's host memory, where the scenario gives it (the host line). The load is
        worked out as a Linux kernel does: every ``LOAD_EVERY_S`` of scenario time, each
        average moves towards the CPUs busy then (the described processes' CPU, 100 % is one
        CPU) by its own time constant; at first all three are the load of the moment, a
        machine that has been as busy for a while. Memory is read as it is now."""
        t = self.now()
        tick = math.floor(t / LOAD_EVERY_S) * LOAD_EVERY_S
        known = self._load
        if known is None or not 0 <= tick - known[0] <= LOAD_CATCH_UP_TICKS * LOAD_EVERY_S:
            busy = self._busy_cpus(tick)
            self._load = (tick, (busy, busy, busy))
        else:
            at, (one, five, fifteen) = known
            while at < tick:
                at += LOAD_EVERY_S
                busy = self._busy_cpus(at)
                one, five, fifteen = (
                    average * decay + busy * (1.0 - decay)
                    for average, decay in zip((one, five, fifteen), LOAD_DECAY, strict=True)
                )
            self._load = (tick, (one, five, fifteen))
        processes = self._described_processes.values()
        bytes_at = self._bytes  # looked up once, not for each process
        memory = [
            bytes_at(p.host_memory_mib, t) for p in processes if p.host_memory_mib is not None
        ]
        return self._load[1], memory

    @functools.cached_property
    def simulated_host_peak(self) -> tuple[float, int]:
        """The most CPUs the described processes can ever keep busy together, and the most
        host memory they can ever hold (bytes): what the simulated machine is sized for,
        once, so its CPU count and memory do not change while its load moves."""
        processes = self._described_processes.values()
        cpus = sum(
            max(0.0, p.cpu_percent.upper_bound()) for p in processes if p.cpu_percent is not None
        )
        memory = sum(
            max(0, round(p.host_memory_mib.upper_bound() * MIB))
            for p in processes
            if p.host_memory_mib is not None
        )
        return cpus / 100.0, memory

    def _busy_cpus(self, t: float) -> float:
        """The CPUs the described processes keep busy at scenario time ``t``."""
        return (
            sum(
                max(0.0, p.cpu_percent.value_at(t))
                for p in self._described_processes.values()
                if p.cpu_percent is not None
            )
            / 100.0
        )

    def simulated_sm_count(self, physical_index: int) -> int | None:
        """A whole GPU's SM count as a simulated CUDA driver gives it (cuDeviceGetAttribute):
        the scenario's, so CUDA's fastest-first order can be estimated (docs/scenario.md)."""
        gpus = self._scenario.gpus
        if not 0 <= physical_index < len(gpus):
            return None
        gpu = gpus[physical_index]
        if gpu.mig_mode is not None and gpu.mig_mode[0] == 1:
            return None  # in MIG mode CUDA sees the instances, never the whole card
        return gpu.multiprocessor_count

    def simulated_uptime_s(self) -> float:
        """How long the simulated machine has been up: it booted a day before its oldest
        process started, so no simulated process predates its boot."""
        since_origin = max(0.0, self.epoch_time() - self._process_start_epoch(0.0))
        return since_origin + self._oldest_start_s_ago + SIMULATED_UP_BEFORE_S

    @functools.cached_property
    def _oldest_start_s_ago(self) -> float:
        return max(
            (p.started_s_ago or 0.0 for p in self._described_processes.values()), default=0.0
        )

    @functools.cached_property
    def _described_processes(self) -> dict[int, ScenarioProcess]:
        """Processes with a user or command, by pid: the scenario never changes."""
        described: dict[int, ScenarioProcess] = {}
        for gpu in self._scenario.gpus:
            for process in (*gpu.processes, *(p for m in gpu.mig_devices for p in m.processes)):
                if process.user is not None or process.cmd:
                    described.setdefault(process.pid, process)
        return described

    def _host_facts(self, process: ScenarioProcess) -> SimulatedProcess:
        t = self.now()
        memory = process.host_memory_mib
        return SimulatedProcess(
            user=process.user,
            command=process.cmd,
            cpu_percent=(
                max(0.0, process.cpu_percent.value_at(t))
                if process.cpu_percent is not None
                else None
            ),
            host_memory_bytes=self._bytes(memory, t) if memory is not None else None,
            start_time=(
                self._process_start_epoch(process.started_s_ago)
                if process.started_s_ago is not None
                else None
            ),
            environment=process.env,
        )

    def _running(self, handle: FakeDeviceHandle, *, compute: bool) -> list[Any]:
        shares = self._memory_shares(handle, self.reading_time())  # card_load.py
        result = []
        for process, ids in self._processes(handle):
            if not (process.is_compute if compute else process.is_graphics):
                continue
            result.append(
                pynvml.nvmlFriendlyObject(
                    {
                        "pid": process.pid,
                        "usedGpuMemory": shares[(ids, process.pid)],
                        "gpuInstanceId": ids[0],
                        "computeInstanceId": ids[1],
                    }
                )
            )
        return result
