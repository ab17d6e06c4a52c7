"""The host line: CPU load, memory, swap and uptime of the machine the GPUs are in.

Read once per sample in the sampling thread (never on the UI thread). On simulated GPUs the
host is simulated too (``simulated_host_stats``): the scenario's processes make its load and
memory, so pictures and tests are the same on every machine.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable

from gputop.core.records import frozen
from gputop.core.units import duration_coarse

GIB = 1024**3


@frozen
class HostStats:
    load_1m: float | None
    load_5m: float | None
    load_15m: float | None
    cpu_count: int | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    swap_used_bytes: int | None
    swap_total_bytes: int | None
    uptime_s: float | None


def read_host_stats(now: float) -> HostStats:
    """This machine's, from the kernel through psutil; a reading that fails is None."""
    import psutil

    load: tuple[float | None, ...] = (None, None, None)
    with contextlib.suppress(OSError):
        load = os.getloadavg()
    memory = swap = None
    uptime = None
    with contextlib.suppress(OSError, RuntimeError):
        memory = psutil.virtual_memory()
    with contextlib.suppress(OSError, RuntimeError):
        swap = psutil.swap_memory()
    with contextlib.suppress(OSError, RuntimeError):
        uptime = max(0.0, now - psutil.boot_time())
    return HostStats(
        load_1m=load[0],
        load_5m=load[1],
        load_15m=load[2],
        cpu_count=os.cpu_count(),
        memory_used_bytes=None if memory is None else memory.total - memory.available,
        memory_total_bytes=None if memory is None else memory.total,
        swap_used_bytes=None if swap is None else swap.used,
        swap_total_bytes=None if swap is None else swap.total,
        uptime_s=uptime,
    )


SIMULATED_CPUS = 64
SIMULATED_MEMORY_BYTES = 512 * GIB
SIMULATED_SWAP_BYTES = 8 * GIB
SIMULATED_BASE_MEMORY_BYTES = 6 * GIB
"""The operating system and its services, on top of the GPU processes' memory."""


def simulated_host_stats(
    load: tuple[float, float, float],
    host_memory: Iterable[int | None],
    uptime_s: float,
    peak: tuple[float, int] = (0.0, 0),
) -> HostStats:
    """A simulated host: the simulated processes' load averages and memory (plus the
    system's), the scenario's uptime. Its size is what ``peak`` (the most CPUs and host
    memory its processes can use) needs, with room to spare, and the same at every moment:
    a machine's CPUs and memory do not change while one watches."""
    used = SIMULATED_BASE_MEMORY_BYTES + sum(m for m in host_memory if m is not None)
    peak_cpus, peak_memory = peak
    most_used = max(used, SIMULATED_BASE_MEMORY_BYTES + peak_memory)
    total = SIMULATED_MEMORY_BYTES
    while total < most_used * 1.5:  # a machine big enough for its processes, with room to spare
        total *= 2
    cpus = SIMULATED_CPUS
    while cpus < max(*load, peak_cpus) * 1.5:
        cpus *= 2
    return HostStats(
        load_1m=load[0],
        load_5m=load[1],
        load_15m=load[2],
        cpu_count=cpus,
        memory_used_bytes=used,
        memory_total_bytes=total,
        swap_used_bytes=0,
        swap_total_bytes=SIMULATED_SWAP_BYTES,
        uptime_s=uptime_s,
    )


def _gib_pair(used: int | None, total: int | None) -> str:
    """``12.3 / 62.7 GiB``: used / total, spaced as every pair gputop shows."""
    if used is None or total is None:
        return "N/A"
    return f"{used / GIB:.1f} / {total / GIB:.1f} GiB"


def _load(value: float | None) -> str:
    return "N/A" if value is None or not math.isfinite(value) else f"{value:.2f}"


def host_line(stats: HostStats) -> str:
    """``up 3d04h  load 1.23 0.98 0.75 / 16 CPUs  mem 12.3 / 62.7 GiB  swap 0.0 / 8.0 GiB``:
    what a narrow terminal cuts (swap) comes last."""
    cpus = "" if stats.cpu_count is None else f" / {stats.cpu_count} CPUs"
    loads = " ".join(_load(v) for v in (stats.load_1m, stats.load_5m, stats.load_15m))
    return (
        f"up {duration_coarse(stats.uptime_s)}"
        f"  load {loads}{cpus}"
        f"  mem {_gib_pair(stats.memory_used_bytes, stats.memory_total_bytes)}"
        f"  swap {_gib_pair(stats.swap_used_bytes, stats.swap_total_bytes)}"
    )
