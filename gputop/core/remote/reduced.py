"""Reduced mode: a host without gputop, read through ``nvidia-smi``'s CSV queries.

The remote command (remote_command.py) loops over two CSV queries framed by marker lines,
and this module turns each frame into the same Snapshot model. What nvidia-smi does not give
stays ``None`` (N/A): process owners and command lines, per-process SM, MIG instances. Processes
of unknown owner make a card busy for the free-card policy, so a reduced host never looks
freer than it is (docs/lab.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

from gputop.core.model import Clocks, GpuProcess, GpuSample, ProcessOrigin, ProcessType, Snapshot
from gputop.core.units import MIB

MAX_GPUS = 256
MAX_PROCESSES = 4096
"""What one frame may hold, as for the agent's snapshots (protocol.py); the lines past them
are skipped and counted: a host that never sent ``@end`` grew its frame for ever."""

# The GPU's name comes last: it is the one field that may hold the CSV separator.
GPU_FIELDS = (
    "index",
    "uuid",
    "pci.bus_id",
    "memory.total",
    "memory.used",
    "memory.free",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "fan.speed",
    "power.draw",
    "power.limit",
    "clocks.gr",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.gr",
    "clocks.max.sm",
    "clocks.max.mem",
    "pstate",
    "driver_version",
    "name",
)
# The process name last, for the same reason.
APP_FIELDS = ("gpu_uuid", "pid", "used_memory", "process_name")

MARK_REDUCED = "@reduced"
MARK_GPUS = "@gpus"
MARK_APPS = "@apps"
MARK_END = "@end"
MARK_NOTHING = "@none"

REDUCED_HINT = "nvidia-smi (reduced mode) gives no owner or command line"
SEPARATOR = ", "


class ReducedFrames:
    """Feed it lines; it returns a Snapshot at the end of each frame.

    A malformed line is skipped and counted (``skipped_lines``), never fatal: one odd
    reading must not take the host down. A reading that is not a finite number (``nan``,
    ``inf``, ``1e999``) is N/A and counted in ``impossible_in_frame``; the ranges are checked
    with every host's (gputop/core/remote/host_values.py).
    """

    def __init__(self, host: str, clock: Callable[[], float] = time.time) -> None:
        self.host = host
        self.skipped_lines = 0
        self._clock = clock
        self._section: str | None = None
        self._gpus: list[GpuSample] = []
        self._apps: list[tuple[str, GpuProcess]] = []
        self._driver_version: str | None = None
        self._impossible: list[str] = []
        self.impossible_in_frame = 0

    def feed(self, line: str) -> Snapshot | None:
        line = line.rstrip("\r\n")
        if line in (MARK_GPUS, MARK_APPS):
            if line == MARK_GPUS:
                self._gpus, self._apps, self._impossible = [], [], []
            self._section = line
            return None
        if line == MARK_END:
            self._section = None
            self.impossible_in_frame = len(self._impossible)
            return self._snapshot()
        if not line.strip():
            return None
        try:
            if self._section == MARK_GPUS and len(self._gpus) < MAX_GPUS:
                gpu, self._driver_version = parse_gpu_line(line, self._impossible)
                self._gpus.append(gpu)
            elif self._section == MARK_APPS and len(self._apps) < MAX_PROCESSES:
                self._apps.append(parse_app_line(line, self._impossible))
            else:  # outside a section, or past what a frame may hold (a frame without end)
                self.skipped_lines += 1
        except ValueError:
            self.skipped_lines += 1
        return None

    def _snapshot(self) -> Snapshot:
        by_uuid = {gpu.uuid: gpu.physical_index for gpu in self._gpus}
        processes: dict[int, list[GpuProcess]] = {}
        for uuid, process in self._apps:
            index = by_uuid.get(uuid)
            if index is not None:
                processes.setdefault(index, []).append(replace(process, physical_index=index))
        cards: dict[int, GpuSample] = {}
        for gpu in self._gpus:  # one card an index: a second is no card (and each of them
            cards.setdefault(gpu.physical_index, gpu)  # took every process of the index)
        gpus = tuple(
            replace(gpu, processes=tuple(processes.get(gpu.physical_index, ())))
            for _, gpu in sorted(cards.items())
        )
        return Snapshot(
            host=self.host,
            driver_version=self._driver_version,
            cuda_driver_version=None,
            nvml_version=None,
            timestamp=self._clock(),
            gpus=gpus,
        )


def parse_gpu_line(line: str, bad: list[str]) -> tuple[GpuSample, str | None]:
    """One ``--query-gpu`` line: the GPU, and the driver version nvidia-smi puts on it.
    Each field that is not a finite number is appended to ``bad``."""
    values = line.split(SEPARATOR, len(GPU_FIELDS) - 1)
    if len(values) != len(GPU_FIELDS):
        raise ValueError(f"expected {len(GPU_FIELDS)} fields, got {len(values)}")
    f = dict(zip(GPU_FIELDS, values, strict=True))
    index = _int(f["index"], bad)
    if index is None:
        raise ValueError("no GPU index")
    gpu = GpuSample(
        physical_index=index,
        uuid=_text(f["uuid"]),
        name=_text(f["name"]),
        pci_bus_id=_text(f["pci.bus_id"]),
        memory_total_bytes=_mib(f["memory.total"], bad),
        memory_used_bytes=_mib(f["memory.used"], bad),
        memory_free_bytes=_mib(f["memory.free"], bad),
        utilization_gpu_percent=_int(f["utilization.gpu"], bad),
        utilization_memory_percent=_int(f["utilization.memory"], bad),
        temperature_c=_int(f["temperature.gpu"], bad),
        fan_percent=_int(f["fan.speed"], bad),
        power_w=_float(f["power.draw"], bad),
        power_limit_w=_float(f["power.limit"], bad),
        clocks=Clocks(
            graphics_mhz=_int(f["clocks.gr"], bad),
            sm_mhz=_int(f["clocks.sm"], bad),
            memory_mhz=_int(f["clocks.mem"], bad),
        ),
        max_clocks=Clocks(
            graphics_mhz=_int(f["clocks.max.gr"], bad),
            sm_mhz=_int(f["clocks.max.sm"], bad),
            memory_mhz=_int(f["clocks.max.mem"], bad),
        ),
        performance_state=_pstate(f["pstate"], bad),
    )
    return gpu, _text(f["driver_version"])


def parse_app_line(line: str, bad: list[str]) -> tuple[str, GpuProcess]:
    """One ``--query-compute-apps`` line: the GPU's UUID and the process on it."""
    values = line.split(SEPARATOR, len(APP_FIELDS) - 1)
    if len(values) != len(APP_FIELDS):
        raise ValueError(f"expected {len(APP_FIELDS)} fields, got {len(values)}")
    uuid, pid_text, memory, name = values
    pid = _int(pid_text, bad)
    if pid is None:
        raise ValueError("no pid")
    program = _text(name)
    return uuid.strip(), GpuProcess(
        pid=pid,
        physical_index=-1,
        type=ProcessType.COMPUTE,
        used_memory_bytes=_mib(memory, bad),
        origin=ProcessOrigin.FOREIGN,
        command=(program,) if program else (),
        hint=REDUCED_HINT,
    )


def _text(value: str) -> str | None:
    """nvidia-smi's "[N/A]", "[Not Supported]", "N/A" and the like are unknown."""
    value = value.strip()
    if not value or value.startswith("[") or value in ("N/A", "Unknown Error"):
        return None
    return value


def _float(value: str, impossible: list[str]) -> float | None:
    text = _text(value)
    if text is None:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    if not math.isfinite(number):
        impossible.append(text)
        return None
    return number


def _int(value: str, impossible: list[str]) -> int | None:
    number = _float(value, impossible)
    return None if number is None else round(number)


def _mib(value: str, impossible: list[str]) -> int | None:
    number = _float(value, impossible)
    if number is None:
        return None
    if not math.isfinite(number * MIB):
        impossible.append(value.strip())
        return None
    return int(number * MIB)


def _pstate(value: str, impossible: list[str]) -> int | None:
    text = _text(value)
    if text is None or not text.startswith("P"):
        return None
    return _int(text[1:], impossible)
