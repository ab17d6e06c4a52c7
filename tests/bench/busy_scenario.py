"""The busy server of issue 29: every reading moves every second, each process has its own
``CUDA_VISIBLE_DEVICES``.

``make bench`` measures the dashboard on ``dgx-h100`` as written, where a few readings are
constant (memory used, the memory clock, each process's memory) and no process carries CUDA
variables. A busy training server is not like that: every card's utilisation, memory,
power, temperature and clocks move every second, and so does every process's SM %, memory
and CPU; and each process was started with its own ``CUDA_VISIBLE_DEVICES`` (torchrun's
ranks all eight cards, Ray's workers one card each by index, a test runner one by UUID), so
the per-process CUDA view (``cuda:N`` of each process) has real work to do. A process's
GPU memory moves every second too, by up to 2 % of its size, over a slow drift of a percent
(issue 44: allocators grow and shrink, evaluation steps take and give back); the process
table sorted by it, which reorders its rows with every such move unless it holds them
(gputop/tui/row_order.py), is what the bench counts as "rows reordered". ``busy()``
turns a scenario into that one; the stand-ins (``stand_ins.py``) are started with each
process's ``env``, so the dashboard reads them from ``/proc/PID/environ`` as on a server.
"""

from __future__ import annotations

import copy
import zlib
from typing import Any

Reading = dict[str, Any]


def moving(
    value: Any, field: str, *, jitter: float, low: float = 0.0, high: float | None = None
) -> Reading:
    """``value`` (a number or a signal) as a signal whose jitter steps every second."""
    signal: Reading = dict(value) if isinstance(value, dict) else {"base": float(value)}
    base = float(signal.get("base", 0.0))
    signal.setdefault("amp", max(jitter, abs(base) * 0.02))
    signal.setdefault("period", 17 + zlib.crc32(field.encode()) % 23)
    signal.setdefault("phase", (zlib.crc32(field.encode()) % 100) / 100)
    signal["jitter"] = max(float(signal.get("jitter", 0.0)), jitter)
    signal["jitter_period"] = 1
    signal.setdefault("min", low)
    if high is not None:
        signal.setdefault("max", high)
    return signal


MEMORY_CHURN = 0.02
"""How far a process's GPU memory moves each second, as a share of its size."""


def _churning(value: Any, field: str) -> Reading:
    """A process's GPU memory: a drift of a percent over minutes (the caching allocator
    keeps most of what it took) and, every second, up to ``MEMORY_CHURN`` more or less
    (what it takes for a step and gives back)."""
    base = float(value["base"]) if isinstance(value, dict) else float(value)
    return {
        "base": base,
        "amp": base * 0.01,
        "period": 240 + zlib.crc32(field.encode()) % 120,
        "phase": (zlib.crc32(field.encode()) % 100) / 100,
        "jitter": base * MEMORY_CHURN,
        "jitter_period": 1,
        "min": 0,
    }


def busy(scenario: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``scenario`` in which every reading moves every second (see above)."""
    out = copy.deepcopy(scenario)
    out["description"] = f"{scenario.get('description', '')} (busy: every reading moves)"
    for index, gpu in enumerate(out["gpus"]):
        key = f"gpu{index}"
        total = float(gpu["memory_total_mib"])
        gpu["memory_used_mib"] = moving(gpu["memory_used_mib"], key + "mem", jitter=700, high=total)
        gpu["utilization_gpu"] = moving(gpu["utilization_gpu"], key + "util", jitter=4, high=100)
        gpu["utilization_memory"] = moving(
            gpu["utilization_memory"], key + "mu", jitter=4, high=100
        )
        limit = float(gpu.get("power_limit_w") or 700)
        gpu["power_w"] = moving(gpu["power_w"], key + "power", jitter=20, high=limit)
        gpu["temperature_c"] = moving(gpu["temperature_c"], key + "temp", jitter=2, high=95)
        clocks = gpu["clocks_mhz"]
        top = gpu.get("max_clocks_mhz", {})
        for name in ("graphics", "sm", "mem", "video"):
            if name in clocks:  # every clock, the memory clock too (harsher than an H100,
                high = float(top.get(name, 3000))  # whose HBM clock stays at its maximum)
                value = clocks[name]
                if not isinstance(value, dict):
                    value = min(float(value), high - 60)
                clocks[name] = moving(value, f"{key}{name}", jitter=20, high=high)
        for rank, process in enumerate(gpu.get("processes", [])):
            where = f"{key}p{rank}"
            used = process.get("used_memory_mib")
            if used is not None:  # an allocator: drifts, and moves every second
                process["used_memory_mib"] = _churning(used, where + "m")
            process["sm_util"] = moving(process.get("sm_util", 0), where + "sm", jitter=6, high=100)
            process["mem_util"] = moving(
                process.get("mem_util", 0), where + "mu", jitter=6, high=100
            )
            process["cpu_percent"] = moving(process.get("cpu_percent", 5), where + "cpu", jitter=8)
            if "host_memory_mib" in process:
                process["host_memory_mib"] = moving(
                    process["host_memory_mib"], where + "h", jitter=40
                )
            process["env"] = _environment(process, gpu, index, len(out["gpus"]))
    return out


def _environment(process: Reading, gpu: Reading, index: int, count: int) -> dict[str, str]:
    """What each kind of job is started with on such a server."""
    command = " ".join(str(part) for part in process.get("cmd", []))
    if "pretrain" in command:  # torchrun: every rank sees all the cards, picks its own
        return {
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(count)),
            "LOCAL_RANK": str(index),
            "RANK": str(index),
            "WORLD_SIZE": str(count),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        }
    if "ray::" in command:  # Ray: one card per worker, by index
        return {"CUDA_VISIBLE_DEVICES": str(index)}
    if "pytest" in command:  # a test runner pinned by UUID, in bus order
        return {"CUDA_VISIBLE_DEVICES": str(gpu["uuid"]), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    if "serve" in command:  # a server given two cards, the other one first
        return {"CUDA_VISIBLE_DEVICES": f"{index},{(index + 1) % count}"}
    return {}  # a notebook: all the cards, in the driver's order
