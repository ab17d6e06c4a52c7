"""What a simulated card's processes add up to: never more than the card, as on a driver.

A scenario gives each reading a signal of its own (what a process would do alone), and a job
launched on a simulated card (pinned.py) brings the job profile's readings on top, so the
fake shares out each card's time and memory (docs/scenario.md, "What adds up"): where its
processes ask for more than the card has, each gets its part in proportion, in whole units
that add up to the card's. A MIG device is a card of its own here. Every call that reports a
process or a card reads the shares from here, so the calls agree; ``CardLoad.shares_at``
hands the same numbers to the tests' C NVML (tests/cnvml/data.py).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TypeVar

from gputop.core.fake.base import MIB, FakeDeviceHandle, FakeNvmlBase
from gputop.core.fake.pinned import PinnedScanner
from gputop.core.fake.scenario_types import ScenarioGpu, ScenarioMigDevice, ScenarioProcess
from gputop.core.fake.signals import Signal
from gputop.core.nvml_layouts import NOT_ON_MIG
from gputop.core.records import frozen

K = TypeVar("K")
Owner = ScenarioGpu | ScenarioMigDevice
InstanceIds = tuple[int, int]
ProcessKey = tuple[InstanceIds, int]
"""A process on a handle: its (GPU, compute) instance ids and its pid."""
TimeShare = tuple[int, int]
"""A process's SM % and memory-controller %."""


def share_out(demands: Mapping[K, int], capacity: int | None) -> dict[K, int]:
    """Each of ``demands`` as it is where they fit in ``capacity`` (``None``: no limit), else
    its part of ``capacity`` in proportion: rounded down, and the units rounding left over
    to the largest remainders, so the parts add up to ``capacity`` exactly, none is more
    than its demand, and a small demand is not rounded away while a unit is left for it."""
    total = sum(demands.values())
    if capacity is None or total <= capacity:
        return dict(demands)
    capacity = max(0, capacity)
    exact = {key: value * capacity for key, value in demands.items()}  # over ``total``
    parts = {key: numerator // total for key, numerator in exact.items()}
    left = capacity - sum(parts.values())
    by_remainder = sorted(demands, key=lambda key: (-(exact[key] % total), -demands[key]))
    for key in by_remainder[:left]:
        parts[key] += 1
    return parts


@frozen
class CardShares:
    """What a GPU or MIG device and its processes read at one moment, all from its shares."""

    utilization: tuple[int, int] | None
    """A GPU's (GPU %, memory %); ``None`` on a MIG device or without ``utilization_gpu``."""
    used_bytes: int | None
    """Its used memory (v2, without what the driver reserves); ``None`` without a total."""
    memory: Mapping[ProcessKey, int | None]
    """Each process's memory (``CardLoad._memory_shares``)."""
    time: Mapping[ProcessKey, TimeShare]
    """Each measured process's (SM %, memory %) (``CardLoad._time_shares``)."""


class CardLoad(FakeNvmlBase):
    """The processes each handle sees, and the shares of its time and memory they get."""

    def shares_at(self, handle: FakeDeviceHandle, t: float) -> CardShares:
        """What ``handle``'s device and its processes read at scenario time ``t``: the
        numbers the calls answer, in one piece for a simulation that serves them itself."""
        gpu = self._gpu(handle)
        owner = self._mig(handle) or gpu
        measures_time = handle.mig is None and gpu.utilization_gpu is not None
        return CardShares(
            utilization=self._card_utilization(gpu, t) if measures_time else None,
            used_bytes=(
                None if owner.memory_total_mib is None else self._card_used_bytes(owner, t)
            ),
            memory=self._memory_shares(handle, t),
            time=self._time_shares(handle, t),
        )

    # -- the processes --------------------------------------------------------------------

    def _owners(self, handle: FakeDeviceHandle) -> list[tuple[Owner, InstanceIds]]:
        """The devices whose processes a handle sees, with their (GPU, compute) instance ids:
        a MIG handle its instance; a GPU handle itself and, in MIG mode, every MIG device."""
        gpu = self._gpu(handle)
        mig = self._mig(handle)
        if mig is not None:
            return [(mig, (mig.gpu_instance_id, mig.compute_instance_id))]
        owners: list[tuple[Owner, InstanceIds]] = [(gpu, (NOT_ON_MIG, NOT_ON_MIG))]
        if _in_mig_mode(gpu):
            owners += [(m, (m.gpu_instance_id, m.compute_instance_id)) for m in gpu.mig_devices]
        return owners

    def _processes(
        self, handle: FakeDeviceHandle
    ) -> tuple[tuple[ScenarioProcess, InstanceIds], ...]:
        """The processes a handle sees (the scenario's and the jobs pinned to it), with their
        (GPU, compute) instance ids: once per driver update."""
        return self._memo(("processes", handle), lambda: tuple(self._each_process(handle)))

    def _each_process(
        self, handle: FakeDeviceHandle
    ) -> Iterator[tuple[ScenarioProcess, InstanceIds]]:
        for owner, ids in self._owners(handle):
            for process in self._on(owner):
                yield process, ids

    def _measured(self, handle: FakeDeviceHandle) -> list[tuple[ScenarioProcess, InstanceIds]]:
        """The processes a handle sees that have an SM reading (those the driver samples)."""
        return self._memo(
            ("measured", handle),
            lambda: [(p, ids) for p, ids in self._processes(handle) if p.sm_util is not None],
        )

    def _on(self, owner: Owner) -> tuple[ScenarioProcess, ...]:
        if self._pinned_scanner is None:
            return owner.processes
        return (*owner.processes, *self._pinned_to(owner.uuid, owner.processes))

    @functools.cached_property
    def _pinned_scanner(self) -> PinnedScanner | None:
        """Only a scenario with a ``job_profile`` lists live pinned processes (pinned.py)."""
        if self._scenario.job_profile is None:
            return None
        uuids = [gpu.uuid for gpu in self._scenario.gpus]
        uuids += [mig.uuid for gpu in self._scenario.gpus for mig in gpu.mig_devices]
        return PinnedScanner(uuids)

    def _pinned_to(
        self, uuid: str, listed: tuple[ScenarioProcess, ...]
    ) -> tuple[ScenarioProcess, ...]:
        """The live processes pinned to the card ``uuid``, as compute processes with the
        scenario's job profile at their age (times the fake's speed)."""
        if self._pinned_scanner is None or self._scenario.job_profile is None:
            return ()
        return self._memo(("pinned", uuid), lambda: self._pinned_now(uuid, listed))

    def _pinned_now(
        self, uuid: str, listed: tuple[ScenarioProcess, ...]
    ) -> tuple[ScenarioProcess, ...]:
        scanner = self._pinned_scanner
        profile = self._scenario.job_profile
        if scanner is None or profile is None:
            return ()
        taken = {process.pid for process in listed}
        result = []
        for pinned in scanner.processes():
            if uuid not in pinned.uuids or pinned.pid in taken:
                continue
            age = pinned.age_s * self.speed

            def at_age(signal: Signal | None, age: float = age) -> Signal | None:
                return None if signal is None else Signal.constant(signal.value_at(age))

            result.append(
                ScenarioProcess(
                    pid=pinned.pid,
                    type="C",
                    used_memory_mib=at_age(profile.used_memory_mib),
                    sm_util=at_age(profile.sm_util),
                    mem_util=at_age(profile.mem_util),
                )
            )
        return tuple(result)

    # -- the card ---------------------------------------------------------------------------

    def _card_utilization(self, gpu: ScenarioGpu, t: float) -> tuple[int, int]:
        """The card's utilisation (GPU %, memory %) at scenario time ``t``: the scenario's
        plus what the jobs pinned to it ask for, at most 100 each. Needs the scenario's
        ``utilization_gpu`` (NOT_SUPPORTED without it)."""
        return self._memo(("utilization", id(gpu), t), lambda: self._utilization_at(gpu, t))

    def _utilization_at(self, gpu: ScenarioGpu, t: float) -> tuple[int, int]:
        pinned = self._pinned_to(gpu.uuid, gpu.processes)
        busy = self._percent(gpu.utilization_gpu, t)
        busy += sum(self._percent(p.sm_util, t) for p in pinned if p.sm_util is not None)
        memory = self._percent_or_zero(gpu.utilization_memory, t)
        memory += sum(self._percent_or_zero(p.mem_util, t) for p in pinned)
        return min(100, busy), min(100, memory)

    def _card_used_bytes(self, owner: Owner, t: float) -> int:
        """The memory a GPU or MIG device has in use at ``t`` (v2 "used", without what the
        driver reserves): at least what its processes hold, at most what it has."""
        return self._memo(("used", id(owner), t), lambda: self._used_bytes_at(owner, t))

    def _used_bytes_at(self, owner: Owner, t: float) -> int:
        asked = self._memory_asked(owner, t)
        listed = sum(asked[p.pid] for p in owner.processes if p.used_memory_mib is not None)
        everyone = sum(asked.values())  # the listed processes' and the pinned jobs'
        used = max(self._bytes_or_zero(owner.memory_used_mib, t), listed) + everyone - listed
        if isinstance(owner, ScenarioGpu) and _in_mig_mode(owner):
            in_migs = sum(self._card_used_bytes(m, t) for m in owner.mig_devices)
            used = max(used, everyone + in_migs)
        capacity = self._capacity_bytes(owner)
        return used if capacity is None else min(capacity, used)

    def _capacity_bytes(self, owner: Owner) -> int | None:
        """What a device's processes may hold: its memory less what the driver reserves."""
        if owner.memory_total_mib is None:
            return None
        total = owner.memory_total_mib * MIB
        reserved = (getattr(owner, "memory_reserved_mib", None) or 0) * MIB
        return max(0, total - reserved)

    # -- the shares -------------------------------------------------------------------------

    def _memory_asked(self, owner: Owner, t: float) -> dict[int, int]:
        """What each process on a device asks for at ``t`` (bytes, by pid; those the scenario
        gives a memory only): what its card's used memory and the shares are made of."""
        return self._memo(("asked", id(owner), t), lambda: self._memory_asked_at(owner, t))

    def _memory_asked_at(self, owner: Owner, t: float) -> dict[int, int]:
        bytes_at = self._bytes  # looked up once, not for each of a card's processes
        return {
            p.pid: bytes_at(p.used_memory_mib, t)
            for p in self._on(owner)
            if p.used_memory_mib is not None
        }

    def _memory_shares(self, handle: FakeDeviceHandle, t: float) -> dict[ProcessKey, int | None]:
        """The memory each process the handle sees holds at scenario time ``t``, by
        (instance ids, pid): what it asks for, or its part of its device's memory where they
        ask for more (``None``: the scenario gives it none, NVML's "not available"). Once
        per driver update: the callers only read it."""
        return self._memo(("memory", handle, t), lambda: self._memory_shares_at(handle, t))

    def _memory_shares_at(self, handle: FakeDeviceHandle, t: float) -> dict[ProcessKey, int | None]:
        shares: dict[ProcessKey, int | None] = {}
        for owner, ids in self._owners(handle):
            everyone = self._on(owner)
            asked = self._memory_asked(owner, t)
            held = share_out(asked, self._capacity_bytes(owner))
            shares.update({(ids, p.pid): held.get(p.pid) for p in everyone})
        gpu = self._gpu(handle)
        if handle.mig is None and _in_mig_mode(gpu):  # its MIG devices' together, in the GPU
            known = {key: value for key, value in shares.items() if value is not None}
            shares.update(share_out(known, self._capacity_bytes(gpu)))
        return shares

    def _time_shares(self, handle: FakeDeviceHandle, t: float) -> dict[ProcessKey, TimeShare]:
        """(SM %, memory %) of each process with an SM reading the handle sees, at scenario
        time ``t``, by (instance ids, pid): what it asks for, or its part of its device's
        utilisation where they ask for more (module docstring). Once per driver update."""
        return self._memo(("time", handle, t), lambda: self._time_shares_at(handle, t))

    def _time_shares_at(self, handle: FakeDeviceHandle, t: float) -> dict[ProcessKey, TimeShare]:
        shares: dict[ProcessKey, TimeShare] = {}
        for owner, ids in self._owners(handle):
            measured = [p for p in self._on(owner) if p.sm_util is not None]
            if not measured:
                continue
            busy, busy_memory = self._busy_limits(owner, t)
            percent = self._percent  # looked up once, not for each process
            sm = share_out({p.pid: percent(p.sm_util, t) for p in measured}, busy)
            memory = {  # as _percent_or_zero: no memory reading reads 0
                p.pid: 0 if p.mem_util is None else percent(p.mem_util, t) for p in measured
            }
            memory = share_out(memory, busy_memory)
            shares.update({(ids, p.pid): (sm[p.pid], memory[p.pid]) for p in measured})
        gpu = self._gpu(handle)
        if handle.mig is None and _in_mig_mode(gpu) and gpu.utilization_gpu is not None:
            busy, busy_memory = self._card_utilization(gpu, t)  # the MIG devices' together
            whole_sm = share_out({key: share[0] for key, share in shares.items()}, busy)
            whole_memory = share_out({key: sh[1] for key, sh in shares.items()}, busy_memory)
            shares = {key: (whole_sm[key], whole_memory[key]) for key in shares}
        return shares

    def _busy_limits(self, owner: Owner, t: float) -> tuple[int | None, int | None]:
        """What a device's processes' SM % and memory % may add up to at ``t``: a MIG
        device's 100 each, a card's utilisation, or no limit where the card has no reading."""
        if not isinstance(owner, ScenarioGpu):
            return 100, 100
        if owner.utilization_gpu is None:
            return None, None
        return self._card_utilization(owner, t)


def _in_mig_mode(gpu: ScenarioGpu) -> bool:
    return gpu.mig_mode is not None and gpu.mig_mode[0] == 1
