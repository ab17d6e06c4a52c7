"""The ``gputop snapshot --json`` document, schema 1.

This is also the format remote hosts will stream, so it only ever grows: fields are added,
never renamed or removed, and a breaking change bumps ``schema``. Unknown values are
``null``; memory is in bytes, power in watts, temperatures in °C, times in epoch seconds.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from gputop.core import model
from gputop.core.clock_events import reason_names
from gputop.core.health import verdict, xids_since
from gputop.core.xid import describe

SCHEMA_VERSION = 1

JsonFields = dict[str, tuple[str, type]]
"""JSON key: (the model's attribute, its kind), for the plain fields a host's document is
read back by (gputop/core/remote/protocol.py), in the order they are written."""


def _fields(kind: type, names: str) -> JsonFields:
    """``names``: JSON keys, each ``key=attribute`` where the model names it otherwise."""
    return {key: (attr or key, kind) for key, _, attr in (n.partition("=") for n in names.split())}


GPU_FIELDS = {
    **_fields(str, "uuid name pci_bus_id sample_error"),
    **_fields(
        int,
        "memory_reserved_bytes memory_total_bytes memory_used_bytes memory_free_bytes "
        "utilization_gpu=utilization_gpu_percent utilization_memory=utilization_memory_percent "
        "temperature_c fan_percent performance_state compute_mode multiprocessor_count",
    ),
    **_fields(float, "power_w power_limit_w throttled_since"),
    **_fields(bool, "persistence_mode mig_mode=mig_mode_current mig_mode_pending"),
}
MIG_FIELDS = {
    **_fields(str, "uuid name"),
    **_fields(
        int,
        "gpu_instance_id compute_instance_id memory_total_bytes memory_used_bytes "
        "multiprocessor_count",
    ),
}
PROCESS_FIELDS = {
    **_fields(str, "mig_uuid user hint"),
    **_fields(int, "used_memory_bytes sm_util=sm_util_percent host_memory_bytes start_ticks"),
    **_fields(float, "cpu_percent start_time"),
}
CLOCK_FIELDS = _fields(int, "graphics=graphics_mhz sm=sm_mhz memory=memory_mhz video=video_mhz")


def _plain(item: object, fields: JsonFields) -> dict[str, Any]:
    return {key: getattr(item, attr) for key, (attr, _) in fields.items()}


def snapshot_to_json(snapshot: model.Snapshot) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION,
        "host": snapshot.host,
        "driver_version": snapshot.driver_version,
        "cuda_driver_version": snapshot.cuda_driver_version,
        "nvml_version": snapshot.nvml_version,
        "timestamp": snapshot.timestamp,
        "simulated": snapshot.simulated,
        "boot_id": snapshot.boot_id,
        "gpus": [_gpu(gpu) for gpu in snapshot.gpus],
    }


def _gpu(gpu: model.GpuSample) -> dict[str, Any]:
    return {
        "index": gpu.physical_index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "pci_bus_id": gpu.pci_bus_id,
        "memory_total_bytes": gpu.memory_total_bytes,
        "memory_used_bytes": gpu.memory_used_bytes,
        "memory_free_bytes": gpu.memory_free_bytes,
        "utilization_gpu": gpu.utilization_gpu_percent,
        "utilization_memory": gpu.utilization_memory_percent,
        "temperature_c": gpu.temperature_c,
        "fan_percent": gpu.fan_percent,
        "power_w": gpu.power_w,
        "power_limit_w": gpu.power_limit_w,
        "clocks_mhz": _plain(gpu.clocks, CLOCK_FIELDS),
        "max_clocks_mhz": _plain(gpu.max_clocks, CLOCK_FIELDS),
        "performance_state": gpu.performance_state,
        "compute_mode": gpu.compute_mode,
        "persistence_mode": gpu.persistence_mode,
        "compute_capability": list(gpu.compute_capability) if gpu.compute_capability else None,
        "multiprocessor_count": gpu.multiprocessor_count,
        "mig_mode": gpu.mig_mode_current,
        "mig_mode_pending": gpu.mig_mode_pending,
        "mig_devices": [_mig(mig) for mig in gpu.mig_devices],
        "lost": gpu.lost,
        "no_access": gpu.no_access,
        "sample_error": gpu.sample_error,
        "memory_reserved_bytes": gpu.memory_reserved_bytes,
        "processes_dropped": gpu.processes_dropped,
        "activity": activity_json(gpu.activity),
        "clock_event_reasons": None
        if gpu.clock_event_mask is None
        else reason_names(gpu.clock_event_mask),
        "throttled_since": gpu.throttled_since,
        "processes": [_process(process, gpu.health) for process in gpu.processes]
        if gpu.processes_listed
        else None,
        "claim": _claim(gpu.claim),
        "unclaimed_users": list(gpu.unclaimed_users),
        "health": health_json(gpu.health),
    }


def health_json(health: model.GpuHealth | None) -> dict[str, Any] | None:
    """A card's health (docs/health.md); each signal ``null`` where the card does not have
    it; the whole ``null`` where it was not read (a lost or refused card)."""
    if health is None:
        return None
    ecc, pages, rows = health.ecc, health.retired_pages, health.remapped_rows
    return {
        "ecc_errors": None if ecc is None else asdict(ecc),
        "retired_pages": None if pages is None else asdict(pages),
        "remapped_rows": None if rows is None else asdict(rows),
        "pcie_replays": health.pcie_replays,
        "nvlink_crc_errors": health.nvlink_crc_errors,
        "xid_events": None
        if health.xid_events is None
        else [
            {
                "xid": event.xid,
                "time": event.time,
                "count": event.count,
                "meaning": describe(event.xid).meaning,
                "action": describe(event.xid).action,
            }
            for event in health.xid_events
        ],
        "xid_counts": {str(code): count for code, count in health.xid_counts},
        "xid_sources": list(health.xid_sources),
        **verdict(health).as_json(),
        "refused": list(health.refused),
        "read_at": health.read_at,
    }


def _claim(claim: model.GpuClaim | None) -> dict[str, Any] | None:
    if claim is None:
        return None
    return {
        **{key: getattr(claim, key) for key in ("user", "until", "note", "job")},
        "certain": claim.doubt is None,  # false: a file that may be a claim (docs/claims.md)
        "reason": claim.doubt,
    }


def _mig(mig: model.MigDevice) -> dict[str, Any]:
    return {**_plain(mig, MIG_FIELDS), "activity": activity_json(mig.activity)}


def activity_json(activity: model.Activity) -> dict[str, float | None]:
    """Exactly ``ACTIVITY_KEYS``; ``null`` where unknown (docs/activity.md)."""
    return dict(zip(model.ACTIVITY_KEYS, activity.values(), strict=True))


def _process(process: model.GpuProcess, health: model.GpuHealth | None = None) -> dict[str, Any]:
    xids = xids_since(health, process.start_time)
    return {
        "pid": process.pid,
        "type": process.type.value,
        "used_memory_bytes": process.used_memory_bytes,
        "sm_util": process.sm_util_percent,
        "mig_uuid": process.mig_uuid,
        "user": process.user,
        "command": list(process.command) if process.command else None,
        "cpu_percent": process.cpu_percent,
        "host_memory_bytes": process.host_memory_bytes,
        "start_time": process.start_time,
        "start_ticks": process.start_ticks,
        "origin": process.origin.value,
        "hint": process.hint,
        "cuda": _cuda(process.cuda),
        "xids_since_start": None if xids is None else list(xids),
    }


_CUDA_AS_IS = (
    "visible_devices device_order rank local_rank world_size master_addr master_port run_id"
)


def _cuda(cuda: model.ProcessCuda | None) -> dict[str, Any] | None:
    """The process's own CUDA view; None where its environment could not be read."""
    if cuda is None:
        return None
    return {
        **{key: getattr(cuda, key) for key in _CUDA_AS_IS.split()},
        "devices": list(cuda.devices),
        "mismatch": cuda.mismatch,
        "devices_from": "driver" if cuda.devices_from_driver else "rules",
        "unknown": cuda.unknown,
    }
