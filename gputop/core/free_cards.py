"""When is a GPU free to take a job: the one rule `gputop pick`, `run --auto` and `--wait` share.

A reading NVML could not give counts as busy: a card wrongly free puts two jobs on it, one
wrongly busy only makes the user wait.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from gputop.core.errors import GputopError, UsageError
from gputop.core.mig_targets import MigTarget, judge_mig_instance, mig_target_by_uuid
from gputop.core.model import GpuClaim, GpuSample, ProcessType, Snapshot
from gputop.core.records import frozen
from gputop.core.units import MIB, NA, counted

GIB = 1024 * MIB
COMPUTE_MODE_PROHIBITED = 2
COMPUTE_MODE_EXCLUSIVE_PROCESS = 3

_NO_JOBS: Mapping[int, Sequence[int]] = MappingProxyType({})
_NO_CLAIMS: Mapping[int, str] = MappingProxyType({})


def gib(value_bytes: int | None) -> str:
    """Sizes in messages: ``71.7 GiB``, the unit people compare with a card's size."""
    return NA if value_bytes is None else f"{value_bytes / GIB:.1f} GiB"


@frozen(slots=False)
class FreePolicy:
    """The thresholds a card must meet to count as free."""

    min_free_mib: int = 1024
    """At least this much free memory."""
    max_util_percent: int = 10
    """At most this GPU utilisation: a few percent is a desktop or an idle notebook kernel."""

    def __post_init__(self) -> None:
        if self.min_free_mib < 0:
            raise UsageError(
                f"The minimum free memory must be 0 MiB or more, not {self.min_free_mib}."
            )
        if not 0 <= self.max_util_percent <= 100:
            raise UsageError(
                f"The maximum utilisation must be between 0 and 100 %, not {self.max_util_percent}."
            )

    @property
    def min_free_bytes(self) -> int:
        return self.min_free_mib * MIB

    def describe(self) -> str:
        return (
            f"at least {gib(self.min_free_bytes)} of free memory, at most "
            f"{self.max_util_percent} % utilisation, no other user's processes and no running "
            "gputop job"
        )


@frozen(slots=False)
class CardVerdict:
    """Whether one card is free, and if not, every reason, for a person."""

    physical_index: int
    free: bool
    reasons: tuple[str, ...]
    free_memory_bytes: int | None
    utilization_percent: int | None


class ActiveJob(Protocol):
    """What the launch warnings need of a gputop job (gputop.core.jobs.model.Job has it)."""

    @property
    def id(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def physical_indices(self) -> tuple[int, ...]: ...


class NotEnoughFreeGpus(GputopError):
    """Fewer cards are free than were asked for; the message says why each other one is not."""

    exit_code = 1

    def __init__(self, wanted: int, verdicts: Sequence[CardVerdict], policy: FreePolicy) -> None:
        super().__init__(_not_enough_message(wanted, verdicts, policy))


def judge_cards(
    snapshot: Snapshot,
    policy: FreePolicy,
    user: str,
    active_job_gpus: Mapping[int, Sequence[int]] = _NO_JOBS,
    claimed: Mapping[int, str] = _NO_CLAIMS,
) -> list[CardVerdict]:
    """One verdict per card, in physical order. ``active_job_gpus``: the cards of gputop's
    waiting and running jobs, taken before their processes show in NVML; ``claimed``: why
    another user's claim holds a card (docs/claims.md)."""
    jobs_by_card: dict[int, list[int]] = {}
    for job_id, indices in sorted(active_job_gpus.items()):
        for index in indices:
            jobs_by_card.setdefault(index, []).append(job_id)
    verdicts = []
    for gpu in sorted(snapshot.gpus, key=lambda g: g.physical_index):
        index = gpu.physical_index
        verdicts.append(_judge(gpu, policy, user, jobs_by_card.get(index, []), claimed.get(index)))
    return verdicts


def pick_free(
    snapshot: Snapshot,
    count: int,
    policy: FreePolicy,
    user: str,
    active_job_gpus: Mapping[int, Sequence[int]] = _NO_JOBS,
    claimed: Mapping[int, str] = _NO_CLAIMS,
) -> list[int]:
    """The ``count`` best free cards (most free memory, then lowest utilisation and index:
    the same answer for the same readings), in physical order; else NotEnoughFreeGpus."""
    if count < 1:
        raise UsageError(f"Cannot pick {count} GPUs: ask for at least 1.")
    verdicts = judge_cards(snapshot, policy, user, active_job_gpus, claimed)
    free = [v for v in verdicts if v.free]
    if len(free) < count:
        raise NotEnoughFreeGpus(count, verdicts, policy)
    ranked = sorted(
        free,
        key=lambda v: (-(v.free_memory_bytes or 0), v.utilization_percent or 0, v.physical_index),
    )
    return sorted(v.physical_index for v in ranked[:count])


def pick_free_targets(
    snapshot: Snapshot,
    count: int,
    policy: FreePolicy,
    user: str,
    active_job_gpus: Mapping[int, Sequence[int | str]] = _NO_JOBS,
    claimed: Mapping[int, str] = _NO_CLAIMS,
) -> list[int | str]:
    """``pick_free``, and for one card (a CUDA process uses only the first MIG instance it
    sees) the free MIG instance with the most free memory where no whole card is free, by
    the MIG rule (mig_targets.py). ``active_job_gpus`` may hold jobs' MIG UUIDs."""
    try:
        whole = whole_cards(active_job_gpus)
        return list(pick_free(snapshot, count, policy, user, whole, claimed))
    except NotEnoughFreeGpus:
        if count != 1:
            raise
        instance = _free_mig_instance(snapshot, policy, user, active_job_gpus, claimed)
        if instance is None:
            raise
        return [instance]


def whole_cards(active: Mapping[int, Sequence[int | str]]) -> dict[int, tuple[int, ...]]:
    """What jobs hold, without the MIG instances: the whole cards' physical indices."""
    return {job: tuple(i for i in held if isinstance(i, int)) for job, held in active.items()}


def _free_mig_instance(
    snapshot: Snapshot,
    policy: FreePolicy,
    user: str,
    active_job_gpus: Mapping[int, Sequence[int | str]],
    claimed: Mapping[int, str] = _NO_CLAIMS,
) -> str | None:
    candidates: list[tuple[int, int, int, str]] = []
    for gpu in sorted(snapshot.gpus, key=lambda g: g.physical_index):
        if not gpu.mig_mode_current or gpu.lost or gpu.no_access:
            continue
        if gpu.physical_index in claimed:  # another user's claim on it or an instance
            continue
        if any(_compute_mode_reasons(gpu)):
            continue
        for device in gpu.mig_devices:
            if not device.uuid:
                continue
            holders = [job for job, held in sorted(active_job_gpus.items()) if device.uuid in held]
            target = MigTarget(gpu, device)
            if not judge_mig_instance(target, policy.min_free_bytes, user, holders).free:
                continue
            total, used = device.memory_total_bytes or 0, device.memory_used_bytes or 0
            candidates.append((-(total - used), gpu.physical_index, device.mig_index, device.uuid))
    return min(candidates)[3] if candidates else None


def launch_warnings(
    snapshot: Snapshot,
    physical_indices: Sequence[int | str],
    user: str,
    active_jobs: Sequence[ActiveJob],
    *,
    policy: FreePolicy | None = None,
) -> list[str]:
    """What a person should know before launching on these cards (never a refusal: a card
    may be shared on purpose); "busy" by ``policy``, default FreePolicy()."""
    policy = FreePolicy() if policy is None else policy
    by_index = {gpu.physical_index: gpu for gpu in snapshot.gpus}
    warnings: list[str] = []
    for index in physical_indices:
        if isinstance(index, str):  # a MIG instance, by UUID: its own policy
            warnings.extend(_mig_warnings(snapshot, index, policy, user, active_jobs))
            continue
        gpu = by_index.get(index)
        if gpu is None or gpu.lost:
            warnings.append(f"GPU {index} is {'not on this machine' if gpu is None else 'lost'}")
            continue
        if gpu.mig_mode_current:
            instances = counted(len(gpu.mig_devices), "MIG instance")
            warnings.append(
                f"GPU {index} is in MIG mode: the job sees its {instances}, not the whole GPU"
                if gpu.mig_devices
                else f"GPU {index} is in MIG mode with no instances"
            )
        if gpu.claim is not None and gpu.claim.user != user:
            warnings.append(f"GPU {index} {_user_claim(gpu.claim)}")
        for job in active_jobs:
            if index in job.physical_indices:
                warnings.append(f"GPU {index} {_job_claim(job)}")
        if not gpu.mig_mode_current:
            details = _busy_details(gpu, policy, user)
            if details:
                warnings.append(f"GPU {index} is busy: " + ", ".join(details))
    return warnings


def _mig_warnings(
    snapshot: Snapshot, mig_uuid: str, policy: FreePolicy, user: str, jobs: Sequence[ActiveJob]
) -> list[str]:
    """A MIG instance is judged alone (gputop.core.mig_targets has the rule)."""
    target = mig_target_by_uuid(snapshot.gpus, mig_uuid)
    if target is None:
        return [f"MIG device {mig_uuid} is not on this machine"]
    claim = target.gpu.claim
    if claim is not None and claim.user != user:
        return [f"{target.label}: its GPU {_user_claim(claim)}"]
    holders = [job.id for job in jobs if mig_uuid in getattr(job, "uuids", ())]
    verdict = judge_mig_instance(target, policy.min_free_bytes, user, holders)
    return [] if verdict.free else [f"{target.label} is busy: " + ", ".join(verdict.reasons)]


def _judge(
    gpu: GpuSample, policy: FreePolicy, user: str, job_ids: list[int], claim: str | None = None
) -> CardVerdict:
    if gpu.lost:
        return CardVerdict(gpu.physical_index, False, ("lost",), None, None)
    free_bytes = _free_bytes(gpu)
    utilization = gpu.utilization_gpu_percent
    if claim is None and gpu.claim is not None and gpu.claim.user != user:
        claim = _claimed(gpu.claim)  # a host's snapshot, the dashboard's
    reasons: list[str] = [claim] if claim else []
    if gpu.mig_mode_current:
        reasons.append("in MIG mode (pin one of its MIG instances instead)")
    reasons.extend(f"in use by gputop job {job_id}" for job_id in job_ids)
    reasons.extend(_compute_mode_reasons(gpu))
    reasons.extend(_owner_reasons(gpu, user))
    if not gpu.mig_mode_current:  # a MIG card's readings are its instances' business
        reasons.extend(_reading_reasons(free_bytes, utilization, policy))
    return CardVerdict(gpu.physical_index, not reasons, tuple(reasons), free_bytes, utilization)


def _free_bytes(gpu: GpuSample) -> int | None:
    if gpu.memory_free_bytes is not None:
        return gpu.memory_free_bytes
    if gpu.memory_total_bytes is not None and gpu.memory_used_bytes is not None:
        return max(0, gpu.memory_total_bytes - gpu.memory_used_bytes)
    return None


def _reading_reasons(
    free_bytes: int | None, utilization: int | None, policy: FreePolicy
) -> list[str]:
    reasons = []
    if free_bytes is None:
        reasons.append("memory use unknown")
    elif free_bytes < policy.min_free_bytes:
        reasons.append(f"only {gib(free_bytes)} free (needs {gib(policy.min_free_bytes)})")
    if utilization is None:
        reasons.append("utilisation unknown")
    elif utilization > policy.max_util_percent:
        reasons.append(f"utilisation {utilization} % (max {policy.max_util_percent} %)")
    return reasons


def _compute_mode_reasons(gpu: GpuSample) -> list[str]:
    """Modes in which CUDA would refuse the job's context outright."""
    if gpu.compute_mode == COMPUTE_MODE_PROHIBITED:
        return ["compute mode is Prohibited (no CUDA program may use it)"]
    if gpu.compute_mode == COMPUTE_MODE_EXCLUSIVE_PROCESS:
        holders = [p.pid for p in gpu.processes if p.type is not ProcessType.GRAPHICS]
        if holders:
            return [f"exclusive-process mode, already held by pid {holders[0]}"]
    return []


def _owner_reasons(gpu: GpuSample, user: str) -> list[str]:
    """Other users' processes, and processes whose owner cannot be known."""
    reasons = []
    others = Counter(p.user for p in gpu.processes if p.user is not None and p.user != user)
    if others:
        reasons.append(_processes_of(others))
    unknown = sum(1 for p in gpu.processes if p.user is None)
    if unknown:
        reasons.append(f"{_processes(unknown)} of unknown owner")
    if not gpu.processes_listed:
        reasons.append("processes not listed by NVML (owners unknown)")
    return reasons


def _processes_of(counts: Counter[str]) -> str:
    """``12 processes of bob, 8 of carol, 1 of alice``: the biggest users first."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    (first_user, first_count), rest = ranked[0], ranked[1:]
    return ", ".join(
        [f"{_processes(first_count)} of {first_user}"]
        + [f"{count} of {name}" for name, count in rest]
    )


def _busy_details(gpu: GpuSample, policy: FreePolicy, user: str) -> list[str]:
    """Why launching here would share the card, or nothing when it would not."""
    free_bytes = _free_bytes(gpu)
    utilization = gpu.utilization_gpu_percent
    problems = _compute_mode_reasons(gpu) + _owner_reasons(gpu, user)
    memory_short = free_bytes is not None and free_bytes < policy.min_free_bytes
    if utilization is not None and utilization > policy.max_util_percent:
        problems.insert(0, f"utilisation {utilization} %")
    if free_bytes is None:
        problems.append("memory use unknown")
    if utilization is None:
        problems.append("utilisation unknown")
    if not problems and not memory_short:
        return []
    details = []
    if gpu.memory_used_bytes is not None and gpu.memory_total_bytes is not None:
        details.append(f"{gib(gpu.memory_used_bytes)} of {gib(gpu.memory_total_bytes)} used")
    details.extend(problems)
    own = sum(1 for p in gpu.processes if p.user == user)
    if own:
        details.append(f"{own} of your processes")
    return details


def _claimed(claim: GpuClaim) -> str:
    """``claimed by ana (2h left)``, or ``may be claimed by bob (why)`` for a file that
    cannot be told (docs/claims.md): either way the card is not free."""
    from gputop.core.claims.view import left_text

    if claim.doubt is not None:
        return f"may be claimed by {claim.user} ({claim.doubt})"
    return f"claimed by {claim.user} ({left_text(claim.until - time.time())} left)"


def _user_claim(claim: GpuClaim) -> str:
    """``is claimed by ana (2h left): …``: another user's claim (docs/claims.md)."""
    if claim.doubt is not None:
        return f"{_claimed(claim)}: gputop refuses to launch there unless it waits for it to end"
    return (
        f"is {_claimed(claim)}: the job will not start there unless it waits for the claim to end"
    )


def _job_claim(job: ActiveJob) -> str:
    # Job.status exists on the store's jobs; anything else counts as running.
    if getattr(job, "status", "running") == "waiting":
        return f"is wanted by job {job.id} ({job.name}), still waiting for its cards"
    return f"is in use by job {job.id} ({job.name}), still running"


def _not_enough_message(wanted: int, verdicts: Sequence[CardVerdict], policy: FreePolicy) -> str:
    free = [v.physical_index for v in verdicts if v.free]
    asked = f"Asked for {counted(wanted, 'free GPU')}"
    if not verdicts:
        return f"{asked}, but this machine has no GPU."
    if wanted > len(verdicts):
        some = f"{len(free)} of them free ({_cards(free)})" if free else "none of them free"
        head = f"{asked}, but this machine has only {counted(len(verdicts), 'GPU')}, {some}."
    elif not free:
        head = f"{asked}, but none is free."
    else:
        verb = "is" if len(free) == 1 else "are"
        head = f"{asked}, but only {len(free)} {verb} free ({_cards(free)})."
    lines = [f"{head} Free means {policy.describe()}."]
    lines.extend(
        f"  GPU {v.physical_index}: {'; '.join(v.reasons)}" for v in verdicts if not v.free
    )
    return "\n".join(lines)


def _cards(indices: Sequence[int]) -> str:
    if len(indices) == 1:
        return f"GPU {indices[0]}"
    return "GPUs " + ", ".join(str(i) for i in indices)


def _processes(count: int) -> str:
    return f"{count} process{'' if count == 1 else 'es'}"
