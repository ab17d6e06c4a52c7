"""Cards as launch targets: how a person names a GPU or a MIG instance, and when an instance
is free.

Naming (``gputop run --gpus``, ``gputop claim``, the dashboard's selection): a GPU by its
physical index or a case-insensitive leading part of exactly one GPU's UUID (``GPU-`` may be
left out); a MIG instance by ``MIG-<uuid>`` or a leading part naming exactly one MIG device,
or by ``G:I``, MIG device index ``I`` of the GPU of physical index ``G`` (not the GPU or
compute instance id); a MIG job is pinned with ``CUDA_VISIBLE_DEVICES=MIG-<full uuid>``
(docs/cuda-visibility.md, "Launching").

An instance is free when its GPU is reachable, no other user's process (nor one of unknown
owner) and no running gputop job is on it, and its free memory meets the policy's minimum.
Utilisation is not judged: NVML measures it for the whole GPU only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from gputop.core.errors import UsageError
from gputop.core.model import GpuSample, MigDevice, Snapshot
from gputop.core.numbers import MAX_ID_DIGITS, is_ascii_digits
from gputop.core.records import frozen
from gputop.core.safe_text import clean

MIG_PREFIX = "MIG-"


@frozen
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


def resolve_gpus(snapshot: Snapshot, tokens: Sequence[str]) -> list[int | str]:
    """Targets from ``["3,1"]`` or ``["3", "GPU-5a9e", "0:1"]``, in the order given: a GPU by
    index or unique UUID prefix, as its index; a MIG instance as its full MIG UUID."""
    known = _known_gpus(snapshot)
    parts = [(token, part.strip()) for token in tokens for part in str(token).split(",")]
    if not parts or all(not part for _, part in parts):
        raise UsageError(f"No GPU given: name cards by index or UUID prefix, e.g. 0,2. {known}")
    given_as: dict[int | str, str] = {}  # in the order given
    for token, part in parts:
        if not part:
            raise UsageError(
                f"The GPU list {token!r} has an empty entry: separate indices or UUID "
                "prefixes with single commas, e.g. 0,2."
            )
        card = _one_target(snapshot, part, known)
        if card in given_as:
            twice = (
                f"({part!r})" if given_as[card] == part else f"({given_as[card]!r} and {part!r})"
            )
            what = f"MIG device {card}" if isinstance(card, str) else f"GPU {card}"
            raise UsageError(f"{what} is given twice {twice}; each card can be pinned once.")
        given_as[card] = part
    return list(given_as)


def _one_target(snapshot: Snapshot, part: str, known: str) -> int | str:
    if ":" in part:
        return _by_index(snapshot, part).uuid
    mig = part[: len(MIG_PREFIX)].upper() == MIG_PREFIX
    if not mig and not part.isascii():  # int() reads "٣" as 3 and "²".isdigit() is True
        raise UsageError(
            f"{part!r} is not a GPU index (digits 0-9) or a UUID prefix (hex digits). {known}"
        )
    if not mig and part.isdigit():
        index = int(part) if len(part) <= MAX_ID_DIGITS else -1
        if any(gpu.physical_index == index for gpu in snapshot.gpus):
            return index
        raise UsageError(f"There is no GPU {part}. {known}")
    # One rule for both kinds: a case-insensitive prefix of exactly one card's UUID.
    wanted = part.lower() if mig or part.lower().startswith("gpu-") else f"gpu-{part.lower()}"
    cards: list[tuple[str, str | None, int | str]] = (
        [(m.label, m.uuid, m.uuid) for m in _mig_targets(snapshot)]
        if mig
        else [(f"GPU {gpu.physical_index}", gpu.uuid, gpu.physical_index) for gpu in snapshot.gpus]
    )
    matches = [card for card in cards if card[1] and card[1].lower().startswith(wanted)]
    if len(matches) == 1:
        return matches[0][2]
    if not matches and mig:
        raise UsageError(f"No MIG device has a UUID starting with {part!r}. {_known(snapshot)}")
    if not matches:
        raise UsageError(f"No GPU has an index or UUID starting with {part!r}. {known}")
    which = " and ".join(f"{label} ({uuid})" for label, uuid, _ in matches)
    kind, more = ("MIG ", ".") if mig else ("", "; give more of it.")
    raise UsageError(f"The {kind}UUID prefix {part!r} is ambiguous: it matches {which}{more}")


def _mig_targets(snapshot: Snapshot) -> list[MigTarget]:
    return [MigTarget(gpu, device) for gpu in snapshot.gpus for device in gpu.mig_devices]


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
    if not all(is_ascii_digits(t) and len(t) <= MAX_ID_DIGITS for t in (gpu_text, device_text)):
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


def _known_gpus(snapshot: Snapshot) -> str:
    gpus = sorted(snapshot.gpus, key=lambda gpu: gpu.physical_index)
    if not gpus:
        return "This machine has no GPU."
    listed = ", ".join(
        f"{gpu.physical_index} ({gpu.short_uuid})" if gpu.uuid else str(gpu.physical_index)
        for gpu in gpus
    )
    return f"This machine has GPUs {listed}."


def _known(snapshot: Snapshot) -> str:
    listed = [
        f"{gpu.physical_index}:{device.mig_index} ({device.uuid})"
        for gpu in sorted(snapshot.gpus, key=lambda g: g.physical_index)
        for device in gpu.mig_devices
    ]
    return f"MIG devices here: {', '.join(listed)}." if listed else "No GPU here has MIG devices."


@frozen
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


def pinned_targets(physical_indices: Sequence[int], uuids: Sequence[str]) -> list[int | str]:
    """What a job is pinned to, in cuda order, as ``resolve_gpus`` names it: whole GPUs by
    index, MIG instances by the UUID recorded at launch."""
    padded = [*uuids, *[""] * (len(physical_indices) - len(uuids))]  # a record may list fewer
    pairs = zip(physical_indices, padded, strict=False)
    return [uuid if uuid.startswith(MIG_PREFIX) else index for index, uuid in pairs]


def target_keys(physical_indices: Sequence[int], uuids: Sequence[str]) -> set[int | str]:
    """What a job holds: whole GPUs by index, MIG instances by UUID (jobs on two instances
    of one GPU do not hold each other's)."""
    return set(pinned_targets(physical_indices, uuids))
