"""Each GPU process's own CUDA view: read from its environment, mapped to physical cards.

A process's ``cuda:N`` depends on the variables it was started with, not on gputop's. They
are read from ``/proc/PID/environ`` once per (pid, start time), on the sampler thread, at
most ``ENVIRON_LIMIT_BYTES``; a process that vanished or refuses is unknown (``None``), and a
read cut at the limit, or a value longer than ``TEXT_LIMIT``, makes the view "unknown
(environment too large)", never "unset". Values are UTF-8 with bad bytes replaced (no lone
surrogate reaches JSON), mapped with ``gputop map``'s resolver; a process NVML shows on a
card its own list excludes is flagged (docs/cuda-visibility.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gputop.core.model import CUDA_ENVIRONMENT, GpuSample, ProcessCuda
from gputop.core.numbers import digits_within
from gputop.core.probes.driver import DriverProbeResult
from gputop.core.probes.driver_mapping import driver_visibility
from gputop.core.records import frozen
from gputop.core.visibility import resolve_visibility

DriverAnswer = Callable[[str | None, str | None], DriverProbeResult | None]
"""The driver probe's answer for (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER), if it has one."""

ENVIRON_LIMIT_BYTES = 256 * 1024
"""More than any real environment holds (Linux limits one string to 128 KiB)."""
TEXT_LIMIT = 4096
TOO_LARGE = "environment too large"
CUDA_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
MAX_RANK = 1 << 24
MAX_PORT = 65535


@frozen
class CudaEnvironment:
    """The watched variables as the process was started with them; absent ones left out."""

    values: tuple[tuple[str, str], ...]
    cut: tuple[str, ...] = ()
    """Watched names whose value is not known: beyond a cut read, or longer than
    ``TEXT_LIMIT``."""

    def get(self, name: str) -> str | None:
        for key, value in self.values:  # at most a few entries: no dict to build
            if key == name:
                return value
        return None


def read_cuda_environment(pid: int, limit: int = ENVIRON_LIMIT_BYTES) -> CudaEnvironment | None:
    """The watched variables of ``pid``, or None when it ended or its environment is refused."""
    data = read_environ(f"/proc/{int(pid)}", limit)
    return None if data is None else parse_environ(data, truncated=len(data) >= limit)


def read_environ(process_dir: str | os.PathLike[str], limit: int) -> bytes | None:
    """The first ``limit`` bytes of a ``/proc/PID`` directory's ``environ``, or None when the
    process ended or its environment is not ours to read: the one place gputop reads another
    process's environment (its job, its Slurm job and its CUDA view all come from here)."""
    path = os.path.join(process_dir, "environ")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:  # ESRCH or EACCES at read time: it ended, or it is not ours to read
        return None
    finally:
        os.close(fd)


def environ_value(data: bytes, name: str) -> str | None:
    """``name``'s value in an environment ``read_environ`` gave (the first entry, as
    ``getenv`` gives it), decoded with undecodable bytes replaced; None where it is absent."""
    wanted = name.encode() + b"="
    for entry in data.split(b"\0"):
        if entry.startswith(wanted):
            return entry[len(wanted) :].decode("utf-8", "replace")
    return None


def parse_environ(data: bytes, truncated: bool = False) -> CudaEnvironment:
    """``NAME=value\\0`` entries; the last one is dropped when the read was cut short, and
    every watched name not seen before the cut is unknown (``cut``), as is a value longer
    than ``TEXT_LIMIT``. The first entry of a name is the one ``getenv`` gives."""
    entries = data.split(b"\0")
    if truncated and entries:
        entries = entries[:-1]
    wanted = {name.encode(): name for name in CUDA_ENVIRONMENT}
    found: dict[str, str] = {}
    cut: set[str] = set()
    for entry in entries:
        raw_name, equals, raw_value = entry.partition(b"=")
        name = wanted.get(raw_name)
        if name is None or not equals or name in found or name in cut:
            continue
        if len(raw_value) > TEXT_LIMIT:
            cut.add(name)
            continue
        found[name] = raw_value.decode("utf-8", "replace")
    if truncated:
        cut.update(name for name in CUDA_ENVIRONMENT if name not in found)
    return CudaEnvironment(tuple(sorted(found.items())), tuple(sorted(cut)))


def _mapped(
    environment: CudaEnvironment,
    gpus: Sequence[GpuSample],
    driver_version: str | None,
    physical_index: int,
    answer: DriverProbeResult | None,
) -> ProcessCuda:
    visible = environment.get("CUDA_VISIBLE_DEVICES")
    order = environment.get("CUDA_DEVICE_ORDER")
    seen = resolve_visibility(gpus, driver_version, visible, order)
    from_driver = driver_visibility(seen, answer, gpus) if answer is not None else None
    if from_driver is not None:
        seen = from_driver
    devices = tuple(device.physical_index for device in seen.devices)
    return ProcessCuda(
        visible_devices=visible,
        device_order=order,
        **_launcher_fields(environment),
        devices=devices,
        mismatch=physical_index not in devices,
        devices_from_driver=from_driver is not None,
    )


def _launcher_fields(environment: CudaEnvironment) -> dict[str, Any]:
    """What a distributed launcher set (rank, world, rendezvous), each range-checked."""
    return {
        "rank": digits_within(environment.get("RANK"), 0, MAX_RANK),
        "local_rank": digits_within(environment.get("LOCAL_RANK"), 0, MAX_RANK),
        "world_size": digits_within(environment.get("WORLD_SIZE"), 1, MAX_RANK),
        "master_addr": environment.get("MASTER_ADDR"),
        "master_port": digits_within(environment.get("MASTER_PORT"), 1, MAX_PORT),
        "run_id": environment.get("TORCHELASTIC_RUN_ID"),
    }


def _unknown_view(environment: CudaEnvironment) -> ProcessCuda:
    """The CUDA variables were not read whole: which cards it sees is unknown."""
    return ProcessCuda(
        visible_devices=None,
        device_order=None,
        **_launcher_fields(environment),
        devices=(),
        mismatch=False,
        unknown=TOO_LARGE,
    )


class CudaViews:
    """Each process's CUDA view, worked out once per (environment, card) while the machine's
    cards stay as they are, and the driver probe's answer stays the same.

    A view depends only on the process's variables, the card NVML shows it on, the cards'
    identities (index, UUID, bus id, name, MIG instances...) and the driver; not on any
    reading that moves. On a server of 200 processes that is a few dozen distinct views, so
    the sampler resolves a view when a new environment appears, not 200 times a second
    (docs/speed.md, "The busy server")."""

    LIMIT = 4096
    """Views kept at most; more (a machine that starts processes without end) starts over."""

    def __init__(self) -> None:
        self._layout: object = None
        self._views: dict[tuple[CudaEnvironment, int], tuple[object, ProcessCuda]] = {}

    def attach(
        self,
        gpus: Sequence[GpuSample],
        environments: Mapping[int, CudaEnvironment | None],
        driver_version: str | None,
        driver: DriverAnswer | None = None,
    ) -> list[GpuSample]:
        """Each GPU with its processes' CUDA views filled in where their environment was
        read."""
        view = self.views_for(gpus, driver_version, driver)
        result = []
        for gpu in gpus:
            if not any(environments.get(p.pid) for p in gpu.processes):
                result.append(gpu)
                continue
            processes = tuple(
                replace(p, cuda=view(env, gpu.physical_index))
                if (env := environments.get(p.pid)) is not None
                else p
                for p in gpu.processes
            )
            result.append(replace(gpu, processes=processes))
        return result

    def views_for(
        self,
        gpus: Sequence[GpuSample],
        driver_version: str | None,
        driver: DriverAnswer | None = None,
    ) -> Callable[[CudaEnvironment, int], ProcessCuda]:
        """The view of (environment, card NVML shows the process on) on these cards: the
        sampler asks it as it builds each process, so a process is built once a refresh."""
        layout = (driver_version, tuple(_identity(gpu) for gpu in gpus))
        if layout != self._layout or len(self._views) > self.LIMIT:
            self._layout = layout
            self._views.clear()

        def view(environment: CudaEnvironment, physical_index: int) -> ProcessCuda:
            return self._view(environment, gpus, driver_version, physical_index, driver)

        return view

    def _view(
        self,
        environment: CudaEnvironment,
        gpus: Sequence[GpuSample],
        driver_version: str | None,
        physical_index: int,
        driver: DriverAnswer | None,
    ) -> ProcessCuda:
        # asked for each of 200 processes a refresh: an environment read whole (no ``cut``)
        # and no driver probe (simulated cards) go straight to the kept view
        unknown = bool(environment.cut) and any(name in environment.cut for name in CUDA_VARIABLES)
        answer = None
        if driver is not None and not unknown:
            answer = driver(
                environment.get("CUDA_VISIBLE_DEVICES"), environment.get("CUDA_DEVICE_ORDER")
            )
        key = (environment, physical_index)
        kept = self._views.get(key)
        if kept is not None and kept[0] is answer:
            return kept[1]
        if unknown:
            view = _unknown_view(environment)
        else:
            view = _mapped(environment, gpus, driver_version, physical_index, answer)
        self._views[key] = (answer, view)
        return view


def _identity(gpu: GpuSample) -> tuple[object, ...]:
    """What of a card a CUDA view depends on: never a reading that moves."""
    return (
        gpu.physical_index,
        gpu.uuid,
        gpu.pci_bus_id,
        gpu.name,
        gpu.compute_capability,
        gpu.multiprocessor_count,
        gpu.max_clocks,
        gpu.lost,
        gpu.no_access,
        gpu.mig_mode_current,
        tuple(
            (m.uuid, m.gpu_instance_id, m.compute_instance_id, m.name, m.multiprocessor_count)
            for m in gpu.mig_devices
        ),
    )
