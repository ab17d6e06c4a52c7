"""A gputop scenario, frozen at one scenario time, as the C NVML's line-based data file.

The scenario is loaded by gputop's own loader (``load_scenario``) and its signals are
evaluated with the same ``Signal.value_at`` the Python fake uses, so the C library and the
fake report the same numbers for the same scenario and time. A card's utilisation and used
memory and its processes' memory, SM % and memory % are the Python fake's shares
(gputop/core/fake/card_load.py, ``shares_at``): a card's processes never add up to more than
the card, as on a driver. A job launched on a simulated card is not listed (the file is
written once; the fake lists live ones), so the file is the scenario's alone.

The file format is read by ``cnvml.c`` (its ``load``): ``system KEY VALUE``,
``gpu INDEX KEY VALUE`` and ``process INDEX KIND PID USED_BYTES SM MEM``,
``mig INDEX SLOT KEY VALUE`` (a MIG device); ``error FUNCTION CODE`` makes a function return
an NVML error code. GPM's answers are ``gpm 1`` (supported) and ``gpm_<metric id> VALUE`` per
GPU and MIG device, evaluated as the Python fake evaluates them
(gputop/core/fake/gpm_calls.py).

What the generation decides (driver, NVML and CUDA versions; which symbols exist) comes from
the library's build, not from the scenario: its ``driver_version`` is not used.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gputop.core.fake import FakeDeviceHandle, FakeNvml, Scenario
from gputop.core.fake.card_load import CardShares
from gputop.core.fake.gpm_calls import METRIC_SIGNALS
from gputop.core.fake.health_calls import health_answers
from gputop.core.fake.scenario import ScenarioGpu, ScenarioMigDevice, ScenarioProcess
from gputop.core.fake.scenario_types import ActivitySignals
from gputop.core.fake.signals import Signal
from gputop.core.fake.usage_calls import energy_j
from gputop.core.nvml_layouts import NOT_ON_MIG

MIB = 1024 * 1024
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_FUNCTION_NOT_FOUND = 13
KINDS = {"C": "C", "G": "G", "C+G": "B", "M+C": "M"}
"""Scenario process type to the C library's kind: ``B`` is in both the compute and graphics
lists, ``M`` (an MPS client) in the MPS list only."""


def data_file_text(
    scenario: Scenario,
    t: float,
    *,
    driver_version: str,
    nvml_version: str,
    default_cuda_driver_version: int,
) -> str:
    """The data file for ``scenario`` at scenario time ``t`` (seconds)."""
    cuda = scenario.cuda_driver_version or default_cuda_driver_version
    lines = [
        f"# {_one_line(scenario.description)} at t={t:g}",
        f"system driver_version {driver_version}",
        f"system nvml_version {nvml_version}",
        f"system cuda_driver_version {cuda}",
    ]
    # Errors on every GPU (missing functions, top-level function_errors), then each GPU's
    # own (no_permission, its function_errors), which win: one line per function and GPU.
    everywhere = {f: NVML_ERROR_FUNCTION_NOT_FOUND for f in scenario.missing_functions}
    everywhere.update(scenario.function_errors)
    lines.extend(f"system error:{f} {code}" for f, code in sorted(everywhere.items()))
    fake = FakeNvml(dataclasses.replace(scenario, job_profile=None), frozen_time=t)
    for index, gpu in enumerate(scenario.gpus):
        shares = fake.shares_at(FakeDeviceHandle(index), t)
        own = {f: NVML_ERROR_NO_PERMISSION for f in gpu.no_permission}
        own.update(gpu.function_errors)
        errors = {**everywhere, **own}
        lines.extend(f"gpu {index} error:{f} {code}" for f, code in sorted(errors.items()))
        lines.extend(f"gpu {index} {k} {v}" for k, v in _gpu_entries(gpu, shares, t))
        lines.extend(_process_line(index, process, shares) for process in gpu.processes)
        for slot, mig in enumerate(gpu.mig_devices):
            on_mig = fake.shares_at(FakeDeviceHandle(index, slot), t)
            lines.extend(
                f"mig {index} {slot} {k} {v}" for k, v in _mig_entries(gpu, mig, on_mig, t)
            )
    return "\n".join(lines) + "\n"


def write_data_file(path: Path, scenario: Scenario, t: float, **options: Any) -> Path:
    """Write the data file for ``scenario`` at ``t``; ``options`` as for ``data_file_text``."""
    path.write_text(data_file_text(scenario, t, **options), encoding="utf-8")
    return path


def gpm_entries(activity: ActivitySignals | None, t: float) -> list[tuple[str, object]]:
    """``gpm_<metric id>`` for each signal: percent capped at 100, MiB/s as GPM answers."""
    entries: list[tuple[str, object]] = []
    if activity is None:
        return entries
    for metric_id, key in METRIC_SIGNALS.items():
        signal = getattr(activity, key)
        if signal is not None:
            value = max(0.0, signal.value_at(t))
            entries.append(
                (f"gpm_{metric_id}", repr(min(100.0, value) if metric_id < 20 else value))
            )
    return entries


def _mig_entries(
    gpu: ScenarioGpu, mig: ScenarioMigDevice, shares: CardShares, t: float
) -> list[tuple[str, object]]:
    name = f"{gpu.name} MIG {mig.profile}" if mig.profile else f"{gpu.name} MIG"
    entries: list[tuple[str, object]] = [
        ("uuid", mig.uuid),
        ("name", _one_line(name)),
        ("gpu_instance_id", mig.gpu_instance_id),
        ("compute_instance_id", mig.compute_instance_id),
    ]
    if mig.memory_total_mib is not None:
        entries.append(("memory_total", mig.memory_total_mib * MIB))
        entries.append(("memory_used", shares.used_bytes))
    if mig.multiprocessor_count is not None:
        entries.append(("multiprocessor_count", mig.multiprocessor_count))
    if mig.gpu_slice_count is not None:
        entries.append(("slices", mig.gpu_slice_count))
    # GPM answers per GPU instance: the first device of the instance with activity gives it
    same = [m for m in gpu.mig_devices if m.gpu_instance_id == mig.gpu_instance_id]
    activity = next((m.activity for m in same if m.activity is not None), None)
    entries.extend(gpm_entries(activity, t))
    return entries


def _gpu_entries(gpu: ScenarioGpu, shares: CardShares, t: float) -> list[tuple[str, object]]:
    entries: list[tuple[str, object]] = [("name", _one_line(gpu.name)), ("uuid", gpu.uuid)]

    def fixed(key: str, value: object) -> None:
        if value is not None:
            entries.append((key, int(value) if isinstance(value, bool) else value))

    def reading(key: str, signal: Signal | None, scale: float = 1.0, cap: int | None = None):
        if signal is not None:
            value = max(0, round(signal.value_at(t) * scale))
            entries.append((key, value if cap is None else min(cap, value)))

    fixed("pci_bus_id", gpu.pci_bus_id)
    fixed("serial", gpu.serial)
    if gpu.memory_total_mib is not None:
        entries.append(("memory_total", gpu.memory_total_mib * MIB))
        entries.append(("memory_reserved", (gpu.memory_reserved_mib or 0) * MIB))
        entries.append(("memory_used", shares.used_bytes))  # at least its processes' (card_load)
    if shares.utilization is not None:
        entries.append(("utilization_gpu", shares.utilization[0]))
        entries.append(("utilization_memory", shares.utilization[1]))
    reading("temperature_c", gpu.temperature_c)
    reading("fan_percent", gpu.fan_percent)
    reading("power_mw", gpu.power_w, 1000)
    if gpu.power_w is not None:  # as the fake counts it (gputop/core/fake/usage_calls.py)
        entries.append(("energy_mj", round(energy_j(gpu.power_w, t) * 1000)))
    if gpu.power_limit_w is not None:
        fixed("power_limit_mw", round(gpu.power_limit_w * 1000))
    for name in ("graphics", "sm", "mem", "video"):
        reading(f"clock_{name}", getattr(gpu.clocks_mhz, name))
        fixed(f"max_clock_{name}", getattr(gpu.max_clocks_mhz, name))
    fixed("performance_state", gpu.performance_state)
    fixed("persistence_mode", gpu.persistence_mode)
    fixed("display_active", gpu.display_active)
    fixed("compute_mode", gpu.compute_mode)
    if gpu.cuda_compute_capability is not None:
        entries.append(("compute_capability", "{} {}".format(*gpu.cuda_compute_capability)))
    entries.extend(health_entries(gpu, t))
    if gpu.bar1_total_mib is not None:
        entries.append(("bar1_total", gpu.bar1_total_mib * MIB))
        reading("bar1_used", gpu.bar1_used_mib or Signal.constant(0), MIB)
    fixed("nvlink_count", gpu.nvlink_count)
    reading("pcie_tx_kbps", gpu.pcie_tx_kbps)
    reading("pcie_rx_kbps", gpu.pcie_rx_kbps)
    if gpu.encoder_util is not None:
        reading("encoder_util", gpu.encoder_util, cap=100)
    if gpu.decoder_util is not None:
        reading("decoder_util", gpu.decoder_util, cap=100)
    if gpu.mig_mode is not None:
        entries.append(("mig_mode", "{} {}".format(*gpu.mig_mode)))
    capability = gpu.cuda_compute_capability
    if (capability is not None and capability >= (9, 0)) or (
        capability is None and gpu.activity is not None
    ):
        entries.append(("gpm", 1))
        entries.extend(gpm_entries(gpu.activity, t))
    mask = 0
    for window in gpu.clock_event_reasons:
        if window.holds_at(t):
            mask |= window.mask
    entries.append(("clock_event_reasons", mask))
    if gpu.lost_after_s is not None and t >= gpu.lost_after_s:
        entries.append(("lost", 1))
    return entries


def health_entries(gpu: ScenarioGpu, t: float) -> list[tuple[str, object]]:
    """What the card answers to the health calls (cnvml_health.c), decided as the Python
    fake decides it (fake/health_calls.py ``health_answers``); the Xids due by ``t``."""
    answers = health_answers(gpu)
    entries: list[tuple[str, object]] = [("pcie_replays", answers.pcie_replays)]
    if answers.ecc is not None:
        entries.append(("ecc_errors", " ".join(map(str, answers.ecc))))
    if answers.retired_pages is not None:
        entries.append(("retired_pages", " ".join(str(int(v)) for v in answers.retired_pages)))
    if answers.remapped_rows is not None:
        entries.append(("remapped_rows", " ".join(str(int(v)) for v in answers.remapped_rows)))
    if answers.nvlink_crc_per_link:
        entries.append(("nvlink_crc", " ".join(map(str, answers.nvlink_crc_per_link))))
    due = [f"{x.xid}:{x.count}" for x in gpu.health.xid_events if x.at_s <= t]
    if due:
        entries.append(("xid_events", " ".join(due)))
    return entries


def _process_line(gpu_index: int, process: ScenarioProcess, shares: CardShares) -> str:
    """A process on the GPU itself, with its shares of the card's memory and time."""
    key = ((NOT_ON_MIG, NOT_ON_MIG), process.pid)
    memory = shares.memory.get(key)
    used = "-" if memory is None else str(memory)
    sm, mem = ("-", "-") if key not in shares.time else (str(n) for n in shares.time[key])
    return f"process {gpu_index} {KINDS[process.type]} {process.pid} {used} {sm} {mem}"


def _one_line(value: str) -> str:
    return " ".join(value.split())
