"""The ``gputop snapshot --prometheus URL --json`` document, schema 1 (docs/fleet.md).

The same key names as ``snapshot --json`` wherever the quantity is the same; ``null`` where
Prometheus does not have a figure, never 0. Label values are as the server gave them (JSON
escapes them; ``strict_json`` writes ASCII only).
"""

from __future__ import annotations

from typing import Any

from gputop.core.fleet.card_health import health_json
from gputop.core.fleet.model import Fleet, FleetGpu, FleetNode, FleetProcess

SCHEMA_VERSION = 1


def fleet_to_json(fleet: Fleet, group_by: str | None = None) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION,
        "source": "prometheus",
        "url": fleet.url,
        "time": fleet.time,
        "summary": {
            "nodes": len(fleet.nodes),
            "gpus": fleet.gpu_count,
            "free_gpus": fleet.free_count,
            "down": fleet.count("down"),
            "stale": fleet.count("stale"),
            "series_passed_over": fleet.passed_over,
            "targets_left_out": [
                {"job": job, "instance": instance, "series_at_least": series}
                for (job, instance), series in sorted(fleet.flooded.items())
            ],
        },
        "group_by": group_by,
        "nodes": [_node(node, group_by) for node in fleet.nodes],
        "users": [
            {
                "user": user.user,
                "memory_used_bytes": int(user.memory_used_bytes),
                "idle_held_memory_bytes": None
                if user.idle_held_memory_bytes is None
                else int(user.idle_held_memory_bytes),
                "gpus": user.gpus,
                "nodes": user.nodes,
            }
            for user in fleet.users
        ],
    }


def node_group(node: FleetNode, group_by: str | None) -> str | None:
    """The node's value of the ``--group-by`` label: its target's, else its cards'."""
    if group_by is None:
        return None
    if group_by in ("host", "Hostname"):
        return node.host
    return node.labels.get(group_by) or None


def node_groups(
    nodes: list[FleetNode], group_by: str | None
) -> list[tuple[str | None, list[FleetNode]]]:
    """The nodes by their ``--group-by`` value, sorted by it (``(none)``: a node without
    one); without ``group_by``, one group named None."""
    if group_by is None:
        return [(None, nodes)]
    groups: dict[str | None, list[FleetNode]] = {}
    for node in nodes:
        groups.setdefault(node_group(node, group_by) or "(none)", []).append(node)
    return sorted(groups.items())


def _node(node: FleetNode, group_by: str | None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "host": node.host,
        "instance": node.instance,
        "job": node.job,
        "state": node.state,
        "last_seen": node.last_seen,
        "scrape_interval_s": node.interval_s,
        "exporter": "gputop" if node.gputop else ("dcgm" if node.gpus else None),
        "labels": dict(sorted(node.labels.items())),
        "gpus": [_gpu(gpu) for gpu in node.sorted_gpus()],
    }
    if group_by is not None:
        document["group"] = node_group(node, group_by)
    return document


def _gpu(gpu: FleetGpu) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "pci_bus_id": gpu.pci_bus_id,
        "driver_version": gpu.driver_version,
        "memory_total_bytes": gpu.memory_total_bytes,
        "memory_used_bytes": gpu.memory_used_bytes,
        "memory_free_bytes": gpu.memory_free_bytes,
        "utilization_gpu": gpu.utilization_gpu,
        "temperature_c": gpu.temperature_c,
        "power_w": gpu.power_w,
        "activity": gpu.activity,
        "health": health_json(gpu),
        "claim": {"user": gpu.claim_user, "until": None} if gpu.claimed else None,
        "processes": None
        if gpu.processes is None
        else [_process(process) for process in gpu.processes],
        "idle_held_memory_bytes": gpu.idle_held_memory_bytes,
        "pod": gpu.pod,
        "namespace": gpu.namespace,
        "container": gpu.container,
        "free": gpu.free,
    }


def _process(process: FleetProcess) -> dict[str, Any]:
    return {
        "pid": process.pid,
        "user": process.user,
        "command_label": process.command,
        "used_memory_bytes": process.used_memory_bytes,
        "sm_util": process.sm_util,
        "gputop_job": process.gputop_job,
        "slurm_job": process.slurm_job,
    }
