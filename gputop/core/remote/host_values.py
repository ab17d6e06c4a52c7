"""A host's numbers checked for meaning, once, where its line is decoded.

The protocol (protocol.py) checks types; this checks that each number can be what it says
(finite, in range, memory within the card's total, pids that can exist, a clock near ours),
since a host can be broken or hostile. A value out of range becomes ``None`` on that field
alone and is counted for the host's status (docs/security.md, "A host's values").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gputop.core.model import ACTIVITY_KEYS, GpuProcess, GpuSample, MigDevice, Snapshot
from gputop.core.numbers import LATEST_TIME_S, MAX_ID, MAX_MEMORY_BYTES, MAX_PID, within
from gputop.core.records import frozen

CLOCK_SKEW_LIMIT_S = 120.0
"""A snapshot stamped further than this from its arrival comes from a clock that is off."""
MAX_GPU_INDEX = 4095
MAX_JOB_ID = MAX_ID
"""As a job id is checked where it is typed or read (gputop.core.numbers.parse_id)."""
MAX_CLOCK_MHZ = 100_000
MAX_POWER_W = 10_000.0
MAX_FAN_PERCENT = 255
"""Fans are reported in percent of their rated speed, and some run above it (model.py)."""
MIN_TEMPERATURE_C, MAX_TEMPERATURE_C = -60, 200
MAX_COUNT = 10**6
MAX_START_TICKS = 2**63 - 1
"""A process's start in clock ticks since boot: the kernel's count is 64 bits."""
MAX_CPU_PERCENT = 100.0 * 4096
"""psutil's CPU percent is per core: 100 for each of up to 4096 cores."""

PERCENT = (0, 100)
MEMORY = (0, MAX_MEMORY_BYTES)
TIME = (1.0, LATEST_TIME_S)

SNAPSHOT_RANGES = {"cuda_driver_version": (0, 999_999)}
GPU_RANGES: dict[str, tuple[float, float]] = {
    "memory_total_bytes": MEMORY,
    "memory_used_bytes": MEMORY,
    "memory_free_bytes": MEMORY,
    "memory_reserved_bytes": MEMORY,
    "utilization_gpu_percent": PERCENT,
    "utilization_memory_percent": PERCENT,
    "temperature_c": (MIN_TEMPERATURE_C, MAX_TEMPERATURE_C),
    "fan_percent": (0, MAX_FAN_PERCENT),
    "power_w": (0, MAX_POWER_W),
    "power_limit_w": (0, MAX_POWER_W),
    "performance_state": (0, 15),
    "compute_mode": (0, 3),
    "multiprocessor_count": (0, MAX_COUNT),
    "pcie_tx_kbps": (0, 10**12),
    "pcie_rx_kbps": (0, 10**12),
    "encoder_util_percent": PERCENT,
    "decoder_util_percent": PERCENT,
    "bar1_total_bytes": MEMORY,
    "bar1_used_bytes": MEMORY,
    "ecc_uncorrected_volatile": (0, 2**63 - 1),
    "nvlink_count": (0, 1024),
}
MAX_RATE_BYTES_PER_S = 1e13
ACTIVITY_RANGES: dict[str, tuple[float, float]] = {
    key: (0, MAX_RATE_BYTES_PER_S) if key.endswith("bytes_per_s") else PERCENT
    for key in ACTIVITY_KEYS
}
WITHIN_TOTAL = ("memory_used_bytes", "memory_free_bytes", "memory_reserved_bytes")
CLOCK_RANGES = {
    name: (0, MAX_CLOCK_MHZ) for name in ("graphics_mhz", "sm_mhz", "memory_mhz", "video_mhz")
}
INSTANCE_IDS = {"gpu_instance_id": (0, MAX_COUNT), "compute_instance_id": (0, MAX_COUNT)}
MIG_AS_GPU = ("memory_total_bytes", "memory_used_bytes", "multiprocessor_count")
"""A MIG device's numbers that mean what a whole GPU's do."""
MIG_RANGES = {**INSTANCE_IDS, **{name: GPU_RANGES[name] for name in MIG_AS_GPU}}
PROCESS_RANGES: dict[str, tuple[float, float]] = {
    "used_memory_bytes": MEMORY,
    "sm_util_percent": PERCENT,
    "memory_util_percent": PERCENT,
    **INSTANCE_IDS,
    "cpu_percent": (0, MAX_CPU_PERCENT),
    "host_memory_bytes": MEMORY,
    "start_time": TIME,
    "start_ticks": (0, MAX_START_TICKS),
}
JOB_NUMBERS: dict[str, tuple[float, float]] = {
    "created_at": TIME,
    "started_at": TIME,
    "ended_at": TIME,
    "exit_code": (-(2**31), 2**31 - 1),
    "signal": (0, 255),
    "pid": (1, MAX_PID),
}


@frozen(slots=False)
class CheckedSnapshot:
    snapshot: Snapshot
    impossible: tuple[str, ...]
    """Where each value that was out of range was (``gpus[0].power_w``), now ``None``."""
    clock_skew_s: float | None
    """How far the host's clock is ahead of ours (negative: behind), when beyond
    ``CLOCK_SKEW_LIMIT_S``; its snapshot is then stamped with the arrival time."""


class _Findings:
    def __init__(self) -> None:
        self.places: list[str] = []

    def checked(self, item: Any, ranges: Mapping[str, tuple[float, float]], where: str) -> Any:
        """``item`` (a frozen dataclass) with each field out of its range set to ``None``."""
        changes: dict[str, Any] = {}
        for name, (minimum, maximum) in ranges.items():
            value = getattr(item, name)
            if value is not None and not within(value, minimum, maximum):
                changes[name] = None
                self.places.append(f"{where}.{name}")
        return replace(item, **changes) if changes else item


def check_snapshot(snapshot: Snapshot, arrived_at: float) -> CheckedSnapshot:
    """``snapshot`` with every impossible value made ``None``; ``arrived_at`` is our wall
    clock when its line came. GPUs with an impossible index and processes with an impossible
    pid cannot be told apart from others, so they are left out (and counted)."""
    findings = _Findings()
    skew: float | None = None
    timestamp = snapshot.timestamp
    if not within(timestamp, *TIME):
        findings.places.append("timestamp")
        timestamp = arrived_at
    elif snapshot.simulated is None and abs(timestamp - arrived_at) > CLOCK_SKEW_LIMIT_S:
        # A simulated host keeps its scenario's clock (``settings.FAKE_TIME`` freezes it), and
        # its start times agree with it; a real one far off is timed by arrival.
        skew, timestamp = timestamp - arrived_at, arrived_at
    gpus = []
    for position, gpu in enumerate(snapshot.gpus):
        where = f"gpus[{position}]"
        if not within(gpu.physical_index, 0, MAX_GPU_INDEX):
            findings.places.append(f"{where}.index")
            continue
        gpus.append(_gpu(gpu, where, findings, trust_times=skew is None, timestamp=timestamp))
    checked = findings.checked(snapshot, SNAPSHOT_RANGES, "snapshot")
    return CheckedSnapshot(
        replace(checked, timestamp=timestamp, gpus=tuple(gpus)), tuple(findings.places), skew
    )


def _gpu(
    gpu: GpuSample, where: str, findings: _Findings, trust_times: bool, timestamp: float
) -> GpuSample:
    gpu = findings.checked(gpu, GPU_RANGES, where)
    total = gpu.memory_total_bytes
    if total is not None:
        over: dict[str, Any] = {
            name: None for name in WITHIN_TOTAL if (getattr(gpu, name) or 0) > total
        }
        findings.places.extend(f"{where}.{name}" for name in over)
        gpu = replace(gpu, **over)
    processes = []
    dropped = 0
    for position, process in enumerate(gpu.processes):
        place = f"{where}.processes[{position}]"
        if not within(process.pid, 1, MAX_PID):
            findings.places.append(f"{place}.pid")
            dropped += 1
            continue
        processes.append(_process(process, total, place, findings, trust_times))
    if not within(gpu.processes_dropped, 0, MAX_COUNT):
        findings.places.append(f"{where}.processes_dropped")
        gpu = replace(gpu, processes_dropped=0)
    capability = gpu.compute_capability
    if capability is not None and not all(within(part, 0, 99) for part in capability):
        findings.places.append(f"{where}.compute_capability")
        capability = None
    claim = gpu.claim
    if claim is not None and not (
        within(claim.until, *TIME) and (claim.job is None or within(claim.job, 1, MAX_JOB_ID))
    ):
        findings.places.append(f"{where}.claim")
        claim = None
    since, held = gpu.throttled_since, None
    if since is not None and not (trust_times and within(since, *TIME)):
        if trust_times:
            findings.places.append(f"{where}.throttled_since")
        since = None
    if since is not None:
        held = max(0.0, timestamp - since) if timestamp is not None else None
    return replace(
        gpu,
        claim=claim,
        activity=findings.checked(gpu.activity, ACTIVITY_RANGES, f"{where}.activity"),
        throttled_since=since,
        throttled_for_s=held,
        clocks=findings.checked(gpu.clocks, CLOCK_RANGES, f"{where}.clocks_mhz"),
        max_clocks=findings.checked(gpu.max_clocks, CLOCK_RANGES, f"{where}.max_clocks_mhz"),
        compute_capability=capability,
        mig_devices=tuple(
            _mig(mig, f"{where}.mig_devices[{i}]", findings)
            for i, mig in enumerate(gpu.mig_devices)
        ),
        processes=tuple(processes),
        processes_dropped=gpu.processes_dropped + dropped,
    )


def _mig(mig: MigDevice, where: str, findings: _Findings) -> MigDevice:
    mig = findings.checked(mig, MIG_RANGES, where)
    mig = replace(
        mig, activity=findings.checked(mig.activity, ACTIVITY_RANGES, f"{where}.activity")
    )
    if (mig.memory_used_bytes or 0) > (mig.memory_total_bytes or MAX_MEMORY_BYTES):
        findings.places.append(f"{where}.memory_used_bytes")
        mig = replace(mig, memory_used_bytes=None)
    return mig


def _process(
    process: GpuProcess, total: int | None, where: str, findings: _Findings, trust_times: bool
) -> GpuProcess:
    process = findings.checked(process, PROCESS_RANGES, where)
    if (process.used_memory_bytes or 0) > (total or MAX_MEMORY_BYTES):
        findings.places.append(f"{where}.used_memory_bytes")
        process = replace(process, used_memory_bytes=None)
    if not trust_times and process.start_time is not None:
        process = replace(process, start_time=None)  # an age from a clock that is off
    return process


def check_jobs(records: list[Any]) -> tuple[list[dict[str, Any]], int]:
    """A host's ``gputop jobs --json`` records, each number checked as above: a record
    without a possible id is left out; an impossible number, ``gpus`` entry or non-text
    ``status`` becomes ``None`` (or is left out of ``gpus``). Returns the records and how
    many values were impossible."""
    kept: list[dict[str, Any]] = []
    impossible = 0
    for record in records:
        job_id = record.get("id") if isinstance(record, dict) else None
        if not isinstance(job_id, int) or not within(job_id, 1, MAX_JOB_ID):
            impossible += 1
            continue
        record = dict(record)
        for name, (minimum, maximum) in JOB_NUMBERS.items():
            value = record.get(name)
            if value is not None and not within(value, minimum, maximum):
                record[name] = None
                impossible += 1
        for name in ("status", "status_text", "name"):
            if record.get(name) is not None and not isinstance(record[name], str):
                record[name] = None
                impossible += 1
        gpus = record.get("gpus")
        if gpus is not None:
            good = (
                [g for g in gpus if isinstance(g, int) and within(g, 0, MAX_GPU_INDEX)]
                if isinstance(gpus, list)
                else []
            )
            if not isinstance(gpus, list) or len(good) != len(gpus):
                impossible += 1
            record["gpus"] = good
        kept.append(record)
    return kept, impossible
