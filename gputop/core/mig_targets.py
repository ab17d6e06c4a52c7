"""MIG instances as launch targets: how a person names one, and when one is free.

Naming (``gputop run --gpus``, the dashboard's selection): ``MIG-<uuid>`` or a leading part
naming exactly one MIG device (case-insensitive), or ``G:I``, MIG device index ``I`` of the
GPU of physical index ``G`` (not the GPU or compute instance id); either way the job is
pinned with ``CUDA_VISIBLE_DEVICES=MIG-<full uuid>`` (docs/cuda-visibility.md, "Launching").

An instance is free when its GPU is reachable, no other user's process (nor one of unknown
owner) and no running gputop job is on it, and its free memory meets the policy's minimum.
Utilisation is not judged: NVML measures it for the whole GPU only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gputop.core.errors import UsageError
from gputop.core.model import GpuSample, MigDevice, Snapshot
from gputop.core.safe_text import clean

MIG_PREFIX = "MIG-"


@dataclass(frozen=True, slots=True)
class MigTarget:
    gpu: GpuSample
    device: MigDevice

    @property
    def uuid(self) -> str:
        return self.device.uuid or ""

    @property
    def label(self) -> str:
        """``GPU 0:1 (MIG 1g.10gb)``: how messages name it."""
        profile = (self.device.name or "").rsplit(" MIG ", 1)[-1] if self.device.name else ""
        shown = f" (MIG {clean(profile)})" if profile else ""
        return f"GPU {self.gpu.physical_index}:{self.device.mig_index}{shown}"


def is_mig_target_text(part: str) -> bool:
    """Whether ``part`` is written as a MIG target (``MIG-...`` or ``G:I``)."""
    return part[: len(MIG_PREFIX)].upper() == MIG_PREFIX or ":" in part


def find_mig_target(snapshot: Snapshot, part: str) -> MigTarget:
    """The MIG device ``part`` names; UsageError saying why where it names none."""
    if ":" in part:
        return _by_index(snapshot, part)
    wanted = part.lower()
    matches = [
        MigTarget(gpu, device)
        for gpu in snapshot.gpus
        for device in gpu.mig_devices
        if device.uuid and device.uuid.lower().startswith(wanted)
    ]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UsageError(f"No MIG device has a UUID starting with {part!r}. {_known(snapshot)}")
    which = " and ".join(f"{m.label} ({m.uuid})" for m in matches)
    raise UsageError(f"The MIG UUID prefix {part!r} is ambiguous: it matches {which}.")


def mig_target_by_uuid(gpus: Iterable[GpuSample], mig_uuid: str) -> MigTarget | None:
    for gpu in gpus:
        for device in gpu.mig_devices:
            if device.uuid == mig_uuid:
                return MigTarget(gpu, device)
    return None


def target_label(gpus: Sequence[GpuSample], target: int | str) -> str:
    """``GPU 3`` for a whole GPU, ``GPU 0:1 (MIG 2g.20gb)`` for a MIG instance's UUID."""
    if isinstance(target, int):
        return f"GPU {target}"
    found = mig_target_by_uuid(gpus, target)
    return found.label if found is not None else f"MIG device {clean(target)}"


def card_label(gpus: Sequence[GpuSample], target: int | str) -> str:
    """``GPU 3  Tesla V100-SXM2-16GB  GPU-80af15aa``: index, name and UUID; a MIG instance's
    label and UUID. Cleaned: names come from the driver."""
    if isinstance(target, str):
        found = mig_target_by_uuid(gpus, target)
        return f"{found.label}  {found.uuid}" if found else f"MIG device {clean(target)}"
    gpu = next((g for g in gpus if g.physical_index == target), None)
    name = (gpu.name if gpu else None) or "?"
    short = (gpu.short_uuid if gpu else None) or ""
    return f"GPU {target}  {clean(name)}  {clean(short)}".rstrip()


def _by_index(snapshot: Snapshot, part: str) -> MigTarget:
    gpu_text, _, device_text = part.partition(":")
    if not (_digits(gpu_text) and _digits(device_text)):
        raise UsageError(
            f"{part!r} is not a MIG device: write GPU:DEVICE with two numbers, e.g. 0:1 for "
            "MIG device 1 of GPU 0 (as nvidia-smi -L lists them), or its MIG- UUID."
        )
    gpu = next((g for g in snapshot.gpus if g.physical_index == int(gpu_text)), None)
    if gpu is None:
        raise UsageError(f"There is no GPU {gpu_text}, so no MIG device {part}. {_known(snapshot)}")
    if not gpu.mig_mode_current:
        raise UsageError(f"GPU {gpu_text} is not in MIG mode: it has no MIG device {part}.")
    for device in gpu.mig_devices:
        if device.mig_index == int(device_text):
            return MigTarget(gpu, device)
    raise UsageError(f"GPU {gpu_text} has no MIG device {device_text}. {_known(snapshot)}")


def _digits(text: str) -> bool:
    return 0 < len(text) <= 18 and all("0" <= c <= "9" for c in text)


def _known(snapshot: Snapshot) -> str:
    listed = [
        f"{gpu.physical_index}:{device.mig_index} ({device.uuid})"
        for gpu in sorted(snapshot.gpus, key=lambda g: g.physical_index)
        for device in gpu.mig_devices
    ]
    return f"MIG devices here: {', '.join(listed)}." if listed else "No GPU here has MIG devices."


@dataclass(frozen=True, slots=True)
class InstanceVerdict:
    free: bool
    reasons: tuple[str, ...]


def judge_mig_instance(
    target: MigTarget,
    min_free_bytes: int,
    user: str,
    pinned_by_jobs: Sequence[int] = (),
) -> InstanceVerdict:
    """Whether a job may take this MIG instance now (the policy in this module's docstring)."""
    if target.gpu.lost:
        return InstanceVerdict(False, ("its GPU is lost",))
    reasons = [f"in use by gputop job {job_id}" for job_id in pinned_by_jobs]
    processes = [p for p in target.gpu.processes if p.mig_uuid == target.uuid]
    others = Counter(p.user for p in processes if p.user is not None and p.user != user)
    reasons.extend(f"{count} process(es) of {name}" for name, count in sorted(others.items()))
    unknown = sum(1 for p in processes if p.user is None)
    if unknown:
        reasons.append(f"{unknown} process(es) of unknown owner")
    if not target.gpu.processes_listed:
        reasons.append("processes not listed by NVML (owners unknown)")
    total, used = target.device.memory_total_bytes, target.device.memory_used_bytes
    if total is None or used is None:
        reasons.append("memory use unknown")
    elif total - used < min_free_bytes:
        free_gib = (total - used) / (1 << 30)
        reasons.append(f"only {free_gib:.1f} GiB free (needs {min_free_bytes / (1 << 30):.1f} GiB)")
    return InstanceVerdict(not reasons, tuple(reasons))


def target_keys(physical_indices: Sequence[int], uuids: Sequence[str]) -> set[int | str]:
    """What a job holds: whole GPUs by index, MIG instances by UUID (jobs on two instances
    of one GPU do not hold each other's)."""
    keys: set[int | str] = set()
    for position, index in enumerate(physical_indices):
        uuid = uuids[position] if position < len(uuids) else ""
        keys.add(uuid if uuid.startswith(MIG_PREFIX) else index)
    return keys
