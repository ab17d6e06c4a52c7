"""One snapshot as Prometheus metric families, under dcgm-exporter's names where they overlap.

What dcgm-exporter charts (``DCGM_FI_DEV_*``) gputop writes with its labels and in its units,
so a dashboard built for it works unchanged; what only gputop knows is under ``gputop_``, in
base units. A reading that is not available is left out, never written as 0 or NaN. Every
label value from outside passes ``labels.label``. The list is docs/exporter.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gputop.core.exporter.health_families import Reading, T, gauges, health_families
from gputop.core.exporter.labels import CommandLabel, command_label, label
from gputop.core.exporter.processes import (
    GpuProcesses,
    ProcessUse,
    bound_processes,
    process_uses,
    user_totals,
)
from gputop.core.history.spans import IDLE_SM_PERCENT
from gputop.core.model import Activity, GpuSample, MigDevice, Snapshot
from gputop.core.process_jobs import NO_JOBS, ProcessJobs
from gputop.core.records import frozen

MIB = 1 << 20
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")
PROF_LABELS = (*GPU_LABELS, "GPU_I_ID", "GPU_I_PROFILE")
"""dcgm-exporter's labels for profiling fields: a MIG GPU instance adds its id and profile
(both empty, so absent in Prometheus, for a whole GPU)."""
PROCESS_LABELS = ("gpu", "UUID", "Hostname", "pid", "user", "command", "gputop_job", "slurm_job")
USER_LABELS = ("Hostname", "user")
HOST_LABELS = ("Hostname",)


@frozen
class Counts:
    """What the sampling loop counted since the exporter started."""

    samples: int = 0
    sampling_errors: int = 0
    last_sample_duration_s: float | None = None


def _readings(
    table: tuple[tuple[str, str, str], ...], suffix: str, divisor: float
) -> tuple[tuple[str, str, Reading[T]], ...]:
    """Each (name, help, attribute path) with its reading: the attribute, divided by
    ``divisor`` where its name ends in ``suffix`` (bytes to MiB, percent to a ratio)."""

    def reading(path: str) -> Reading[T]:
        get, by = attrgetter(path), divisor if path.endswith(suffix) else 1
        return lambda item: None if (value := get(item)) is None else value / by

    return tuple((name, help_text, reading(path)) for name, help_text, path in table)


DCGM_GAUGES: tuple[tuple[str, str, Reading[GpuSample]], ...] = _readings(
    (
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "utilization_gpu_percent"),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "utilization_memory_percent"),
        ("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).", "encoder_util_percent"),
        ("DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).", "decoder_util_percent"),
        *(
            (
                f"DCGM_FI_DEV_FB_{part.upper()}",
                f"Framebuffer memory {part} (in MiB).",
                f"memory_{part}_bytes",
            )
            for part in ("used", "free", "total", "reserved")
        ),
        ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temperature_c"),
        ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power_w"),
        ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit (in W).", "power_limit_w"),
        ("DCGM_FI_DEV_FAN_SPEED", "Fan speed (in % of its rated speed).", "fan_percent"),
        ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "clocks.sm_mhz"),
        ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "clocks.memory_mhz"),
        ("DCGM_FI_DEV_PSTATE", "Performance state (0 to 15).", "performance_state"),
        (
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "Uncorrectable (double-bit) ECC errors since the driver loaded.",
            "ecc_uncorrected_volatile",
        ),
        (
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            "Clock event (throttle) reasons, NVML's bit mask.",
            "clock_event_mask",
        ),
    ),
    "_bytes",
    MIB,
)
DCGM_PROF_GAUGES: tuple[tuple[str, str, Reading[Activity]], ...] = _readings(
    (
        (
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "Ratio of time the graphics engine is active.",
            "graphics_percent",
        ),
        (
            "DCGM_FI_PROF_SM_ACTIVE",
            "The ratio of cycles an SM has at least 1 warp assigned.",
            "sm_active_percent",
        ),
        (
            "DCGM_FI_PROF_SM_OCCUPANCY",
            "The ratio of number of warps resident on an SM.",
            "sm_occupancy_percent",
        ),
        (
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "Ratio of cycles the tensor (HMMA) pipe is active.",
            "tensor_active_percent",
        ),
        (
            "DCGM_FI_PROF_DRAM_ACTIVE",
            "Ratio of cycles the device memory interface is active sending or receiving data.",
            "dram_active_percent",
        ),
        *(
            (
                f"DCGM_FI_PROF_PIPE_FP{bits}_ACTIVE",
                f"Ratio of cycles the fp{bits} pipes are active.",
                f"fp{bits}_percent",
            )
            for bits in (64, 32, 16)
        ),
        *(
            (
                f"DCGM_FI_PROF_{link.upper()}_{way.upper()}_BYTES",
                f"The rate of data {verb} over {over} (in B/s).",
                f"{link}_{way}_bytes_per_s",
            )
            for link, over in (("pcie", "the PCIe bus"), ("nvlink", "NVLink"))
            for way, verb in (("tx", "transmitted"), ("rx", "received"))
        ),
    ),
    "_percent",
    100.0,
)
"""dcgm-exporter's profiling fields, from GPM (docs/activity.md): only where GPM answers,
never from another NVML reading (DCGM's own figures before Hopper come from a profiling
module NVML cannot reproduce)."""


def gpu_labels(gpu: GpuSample, host: str) -> list[str]:
    """dcgm-exporter's labels for one GPU: ``device`` is ``nvidia<physical index>``."""
    return [
        str(gpu.physical_index),
        label(gpu.uuid),
        label(gpu.pci_bus_id),
        f"nvidia{gpu.physical_index}",
        label(gpu.name),
        host,
    ]


def snapshot_families(
    snapshot: Snapshot,
    *,
    top: int,
    jobs: Mapping[int, ProcessJobs],
    counts: Counts,
    command: CommandLabel = "redacted",
) -> list[Metric]:
    """Every family for ``snapshot``, at most ``top`` process series per GPU; ``command``:
    how a process's command line is written (labels.command_label)."""
    host = label(snapshot.host)
    labelled = [(gpu, gpu_labels(gpu, host)) for gpu in snapshot.gpus]
    families = list(gauges(DCGM_GAUGES, GPU_LABELS, labelled))
    families += health_families(labelled, GPU_LABELS)
    families += gauges(DCGM_PROF_GAUGES, PROF_LABELS, _activity_series(labelled))
    per_gpu = [(gpu, process_uses(gpu)) for gpu in snapshot.gpus if gpu.processes_listed]
    bounded = {gpu.physical_index: bound_processes(uses, top) for gpu, uses in per_gpu}
    families += _gpu_state_families(labelled, bounded)
    families += _process_families(snapshot, host, bounded, jobs, command)
    families += _user_families(host, per_gpu)
    families += _exporter_families(snapshot, host, counts)
    return families


def mig_profile(mig: MigDevice) -> str:
    """``3g.40gb`` from NVML's MIG device name (``NVIDIA H100 80GB HBM3 MIG 3g.40gb``)."""
    name = mig.name or ""
    return name.rsplit(" MIG ", 1)[1] if " MIG " in name else ""


def _activity_series(
    labelled: list[tuple[GpuSample, list[str]]],
) -> list[tuple[Activity, list[str]]]:
    """Each GPU's and each MIG GPU instance's activity (once per instance), labelled."""
    series: list[tuple[Activity, list[str]]] = []
    for gpu, labels in labelled:
        if gpu.lost or not gpu.activity.gpm:
            continue
        series.append((gpu.activity, [*labels, "", ""]))
        seen: set[int] = set()
        for mig in gpu.mig_devices:
            instance = mig.gpu_instance_id
            if instance is None or instance in seen or not mig.activity.gpm:
                continue
            seen.add(instance)
            series.append((mig.activity, [*labels, str(instance), label(mig_profile(mig))]))
    return series


def _gpu_state_families(
    labelled: list[tuple[GpuSample, list[str]]], bounded: Mapping[int, GpuProcesses]
) -> list[Metric]:
    def gauge(name: str, help_text: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, help_text, labels=GPU_LABELS)

    lost = gauge("gputop_gpu_lost", "1 when the GPU fell off the bus or stopped answering.")
    no_access = gauge("gputop_gpu_no_access", "1 when NVML refused this process the GPU.")
    failed = gauge("gputop_gpu_sample_error", "1 when the newest reading of the GPU failed.")
    processes = gauge("gputop_gpu_processes", "Processes on the GPU (every one, kept or not).")
    dropped = gauge(
        "gputop_gpu_processes_dropped",
        "Entries NVML listed with an impossible pid (0, or 2**31 and above), left out.",
    )
    idle = gauge(
        "gputop_gpu_idle_held_memory_bytes",
        f"Memory held by processes whose SM utilization is under {IDLE_SM_PERCENT:g} %.",
    )
    others = gauge(
        "gputop_gpu_other_processes",
        "Processes past the exporter's --top on this GPU, not exported one by one.",
    )
    other_memory = gauge(
        "gputop_gpu_other_processes_memory_used_bytes",
        "GPU memory of the processes past --top, summed.",
    )
    other_sm = gauge(
        "gputop_gpu_other_processes_sm_util_percent",
        "SM utilization of the processes past --top, summed (in %).",
    )
    claimed = GaugeMetricFamily(
        "gputop_gpu_claimed",
        "1 while a user's gputop claim holds the GPU (docs/claims.md); no series when none does.",
        labels=(*GPU_LABELS, "user"),
    )
    for gpu, labels in labelled:
        if gpu.claim is not None and gpu.claim.doubt is None:  # a believable claim
            claimed.add_metric([*labels, label(gpu.claim.user)], 1.0)
        lost.add_metric(labels, 1.0 if gpu.lost else 0.0)
        no_access.add_metric(labels, 1.0 if gpu.no_access else 0.0)
        failed.add_metric(labels, 1.0 if gpu.sample_error is not None else 0.0)
        held = bounded.get(gpu.physical_index)
        if held is None:  # NVML would not list them: unknown, not none
            continue
        processes.add_metric(labels, float(len(held.top) + held.other_count))
        dropped.add_metric(labels, float(gpu.processes_dropped))
        idle.add_metric(labels, float(held.idle_held_bytes))
        others.add_metric(labels, float(held.other_count))
        other_memory.add_metric(labels, float(held.other_memory_bytes))
        other_sm.add_metric(labels, float(held.other_sm_percent))
    return [
        lost,
        no_access,
        failed,
        processes,
        dropped,
        idle,
        others,
        other_memory,
        other_sm,
        claimed,
    ]


def _process_families(
    snapshot: Snapshot,
    host: str,
    bounded: Mapping[int, GpuProcesses],
    jobs: Mapping[int, ProcessJobs],
    command: CommandLabel,
) -> list[Metric]:
    memory = GaugeMetricFamily(
        "gputop_process_memory_used_bytes",
        "GPU memory a process holds on a GPU.",
        labels=PROCESS_LABELS,
    )
    sm = GaugeMetricFamily(
        "gputop_process_sm_util_percent",
        "SM utilization of a process on a GPU (in %).",
        labels=PROCESS_LABELS,
    )
    for gpu in snapshot.gpus:
        held = bounded.get(gpu.physical_index)
        if held is None:
            continue
        for use in held.top:
            labels = _process_labels(gpu, host, use, jobs.get(use.process.pid, NO_JOBS), command)
            if use.memory_used_bytes is not None:
                memory.add_metric(labels, float(use.memory_used_bytes))
            if use.sm_util_percent is not None:
                sm.add_metric(labels, float(use.sm_util_percent))
    return [memory, sm]


def _process_labels(
    gpu: GpuSample, host: str, use: ProcessUse, jobs: ProcessJobs, command: CommandLabel
) -> list[str]:
    process = use.process
    return [
        str(gpu.physical_index),
        label(gpu.uuid),
        host,
        str(process.pid),
        label(process.user),
        command_label(process.command, mode=command),
        "" if jobs.gputop_job is None else str(jobs.gputop_job),
        "" if jobs.slurm_job is None else str(jobs.slurm_job),
    ]


def _user_families(host: str, per_gpu: list[tuple[GpuSample, list[ProcessUse]]]) -> list[Metric]:
    memory = GaugeMetricFamily(
        "gputop_user_memory_used_bytes",
        "GPU memory a user's processes hold, over every GPU.",
        labels=USER_LABELS,
    )
    idle = GaugeMetricFamily(
        "gputop_user_idle_held_memory_bytes",
        "GPU memory a user's processes hold while their SM utilization is under "
        f"{IDLE_SM_PERCENT:g} %.",
        labels=USER_LABELS,
    )
    processes = GaugeMetricFamily(
        "gputop_user_processes", "A user's GPU processes.", labels=USER_LABELS
    )
    gpus = GaugeMetricFamily(
        "gputop_user_gpus", "GPUs on which a user has a process.", labels=USER_LABELS
    )
    totals = user_totals((gpu.physical_index, uses) for gpu, uses in per_gpu)
    for user, total in sorted(totals.items()):
        labels = [host, label(user)]
        memory.add_metric(labels, float(total.memory_used_bytes))
        idle.add_metric(labels, float(total.idle_held_bytes))
        processes.add_metric(labels, float(len(total.pids)))
        gpus.add_metric(labels, float(len(total.gpus)))
    return [memory, idle, processes, gpus]


def _exporter_families(snapshot: Snapshot, host: str, counts: Counts) -> list[Metric]:
    samples = CounterMetricFamily(
        "gputop_samples", "Samples the exporter took of every GPU.", labels=HOST_LABELS
    )
    samples.add_metric([host], float(counts.samples))
    errors = CounterMetricFamily(
        "gputop_sampling_errors",
        "Samples that failed, and GPU readings that failed within a sample.",
        labels=HOST_LABELS,
    )
    errors.add_metric([host], float(counts.sampling_errors))
    lost = GaugeMetricFamily(
        "gputop_gpus_lost", "GPUs lost, in the newest sample.", labels=HOST_LABELS
    )
    lost.add_metric([host], float(sum(gpu.lost for gpu in snapshot.gpus)))
    stamp = GaugeMetricFamily(
        "gputop_last_sample_timestamp_seconds",
        "When the newest sample was taken (seconds since the epoch).",
        labels=HOST_LABELS,
    )
    stamp.add_metric([host], snapshot.timestamp)
    families: list[Metric] = [samples, errors, lost, stamp]
    if counts.last_sample_duration_s is not None:
        duration = GaugeMetricFamily(
            "gputop_sample_duration_seconds",
            "How long the newest sample took.",
            labels=HOST_LABELS,
        )
        duration.add_metric([host], counts.last_sample_duration_s)
        families.append(duration)
    return families
