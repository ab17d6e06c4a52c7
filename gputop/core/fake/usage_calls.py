"""Simulated calls for what a job used: the energy counter and per-process accounting.

The energy is the scenario's ``power_w`` summed second by second from scenario t=0, so it
only ever grows; accounting follows the GPU's ``accounting_mode``, with stats from the
``job_profile`` for a live process pinned to the card (pinned.py). docs/scenario.md,
"Energy and accounting", has every answer.
"""

from __future__ import annotations

import functools
import math

import pynvml

from gputop.core.fake.base import MIB, FakeDeviceHandle, nvml_error, nvml_function
from gputop.core.fake.process_calls import ProcessCalls
from gputop.core.fake.signals import Signal

MAX_ACCOUNTED_SAMPLES = 100_000
"""A process older than this many (scenario) seconds is sampled more sparsely."""


class UsageCalls(ProcessCalls):
    """Energy counter and accounting stats of one GPU."""

    @nvml_function()
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeDeviceHandle) -> int:
        power = self._gpu(handle).power_w
        if power is None:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        sums = self._energy_sums.setdefault(handle.gpu, [0.0])
        return round(energy_j(power, self.now(), sums) * 1000)

    @nvml_function()
    def nvmlDeviceGetAccountingMode(self, handle: FakeDeviceHandle) -> int:
        mode = self._static(self._gpu(handle).accounting_mode)
        return pynvml.NVML_FEATURE_ENABLED if mode else pynvml.NVML_FEATURE_DISABLED

    @nvml_function()
    def nvmlDeviceGetAccountingStats(self, handle: FakeDeviceHandle, pid: int) -> object:
        gpu = self._gpu(handle)
        profile = self._scenario.job_profile
        if not gpu.accounting_mode:
            nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        scanner = self._pinned_scanner
        pinned = [p for p in (scanner.processes() if scanner else ()) if p.pid == pid]
        if profile is None or not pinned or gpu.uuid not in pinned[0].uuids:
            nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        age = pinned[0].age_s * self.speed
        stats = pynvml.c_nvmlAccountingStats_t()
        memory = _over_life(profile.used_memory_mib, age)
        sm = _over_life(profile.sm_util, age)
        stats.maxMemoryUsage = round(max(0.0, max(memory)) * MIB) if memory else 0
        stats.gpuUtilization = min(100, max(0, round(sum(sm) / len(sm)))) if sm else 0
        stats.memoryUtilization = 0
        stats.time = round(pinned[0].age_s * 1000)
        stats.startTime = round((self.epoch_time() - pinned[0].age_s) * 1_000_000)
        stats.isRunning = 1
        return stats

    @functools.cached_property
    def _energy_sums(self) -> dict[int, list[float]]:
        """Joules up to each whole second, by GPU."""
        return {}


def energy_j(power: Signal, t: float, sums: list[float] | None = None) -> float:
    """Joules from scenario t=0 to ``t``, each whole second at the power of its start.

    ``sums`` (starting ``[0.0]``) keeps the sums up to each whole second between calls.
    """
    sums = [0.0] if sums is None else sums
    whole = max(0, math.floor(t))
    while len(sums) <= whole:
        sums.append(sums[-1] + max(0.0, power.value_at(len(sums) - 1)))
    return sums[whole] + max(0.0, power.value_at(whole)) * max(0.0, t - whole)


def _over_life(signal: Signal | None, age: float) -> list[float]:
    """The signal at each second of a process's life so far (at least once)."""
    if signal is None:
        return []
    step = max(1.0, age / MAX_ACCOUNTED_SAMPLES)
    count = int(age // step) + 1
    return [signal.value_at(i * step) for i in range(count)]
