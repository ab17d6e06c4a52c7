"""CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER to ``cuda:N`` -> physical GPU, as the driver does.

Rule numbers refer to docs/cuda-visibility.md. Where
the driver's behaviour is undocumented, the choice made here is said in a warning instead of
being presented as fact.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputop.core.model import GpuSample, MigDevice
from gputop.core.visibility.model import LogicalDevice, Visibility, VisibilityWarning
from gputop.core.visibility.order import PCI_BUS_ID, CudaOrder, cuda_order
from gputop.core.visibility.tokens import (
    GpuUuidEntry,
    IntegerEntry,
    InvalidEntry,
    LegacyMigEntry,
    MigUuidEntry,
    parse_entry,
    split_entries,
)
from gputop.core.visibility.torch_rules import torch_view

CVD = "CUDA_VISIBLE_DEVICES"
MAX_MIG_DEVICES = 64
MIG_UUID_SINCE = 470
MANY_MIG_SINCE = 570

Target = tuple[GpuSample, MigDevice | None]


def resolve_visibility(
    gpus: Sequence[GpuSample],
    driver_version: str | None,
    cuda_visible_devices: str | None,
    cuda_device_order: str | None,
    *,
    driver_order: Sequence[str] | None = None,
) -> Visibility:
    """The logical devices a CUDA process started with these variables would see.

    ``driver_order``: the UUID per CUDA ordinal from the driver probe with both variables
    unset, which fixes FASTEST_FIRST; without it that order is estimated.
    """
    # A GPU NVML refuses (NO_PERMISSION: a device cgroup, a container) is one CUDA in this
    # process cannot open either, so the driver does not number it.
    refused = [gpu.physical_index for gpu in gpus if gpu.no_access]
    gpus = [gpu for gpu in gpus if not gpu.no_access]
    ordering = cuda_order(gpus, cuda_device_order, driver_order)
    driver_major = _driver_major(driver_version)
    warnings: list[VisibilityWarning] = []
    if not ordering.recognised:
        warnings.append(
            VisibilityWarning(
                "unknown-order",
                f"CUDA_DEVICE_ORDER={cuda_device_order!r} is not a value the driver documents "
                "(FASTEST_FIRST or PCI_BUS_ID); gputop assumes FASTEST_FIRST, the default.",
            )
        )
    stopped_at = None
    if cuda_visible_devices is None:  # rule 1
        targets: list[Target] = [(gpu, None) for gpu in ordering.gpus]
        uses_integers = True
    elif cuda_visible_devices == "":  # rule 2
        targets, uses_integers = [], False
    else:
        targets, stopped_at, uses_integers = _select(
            cuda_visible_devices, ordering, gpus, driver_major, warnings
        )
    units = _expand_mig(targets, driver_major, cuda_visible_devices is None, warnings)
    devices = tuple(
        LogicalDevice(
            logical_index=position,
            physical_index=gpu.physical_index,
            uuid=gpu.uuid,
            name=mig.name if mig is not None and mig.name else gpu.name,
            mig_uuid=mig.uuid if mig is not None else None,
        )
        for position, (gpu, mig) in enumerate(units)
    )
    if uses_integers and devices:
        warnings.extend(_order_warnings(ordering, cuda_device_order))
    if refused:
        warnings.append(_no_access_warning(refused))
    warnings.extend(_torch_warnings(gpus, cuda_visible_devices, devices))
    if (
        cuda_visible_devices is not None
        and not devices
        and not any(w.code == "duplicate" for w in warnings)
    ):
        warnings.append(
            VisibilityWarning(
                "no-devices",
                f"{CVD}={cuda_visible_devices!r} leaves no GPU visible: CUDA programs will fail "
                "with 'no CUDA-capable device is detected'.",
            )
        )
    return Visibility(
        cuda_visible_devices=cuda_visible_devices,
        cuda_device_order=cuda_device_order,
        devices=devices,
        warnings=tuple(warnings),
        order_certain=ordering.certain or not uses_integers,
        stopped_at=stopped_at,
        order_from_driver=ordering.from_driver,
    )


def _select(
    value: str,
    ordering: CudaOrder,
    gpus: Sequence[GpuSample],
    driver_major: int | None,
    warnings: list[VisibilityWarning],
) -> tuple[list[Target], int | None, bool]:
    """Rules 3-13 and 19-20: the entries before the first invalid one, or none on a repeat."""
    entries = split_entries(value)
    chosen: list[Target] = []
    named_at: dict[tuple[int, str | None], int] = {}
    uses_integers = False
    for position, raw in enumerate(entries):
        entry = parse_entry(raw)
        uses_integers = uses_integers or isinstance(entry, IntegerEntry)
        target, reason = _lookup(entry, ordering, gpus, driver_major)
        if target is None:
            rest = len(entries) - position - 1
            ignored = f" and the {rest} after it" if rest else ""
            warnings.append(
                VisibilityWarning(
                    "invalid-entry",
                    f"{CVD} entry {position + 1} ({raw!r}) {reason}: the driver stops there, "
                    f"ignoring it{ignored}.",
                )
            )
            return chosen, position, uses_integers
        gpu, mig = target
        key = (gpu.physical_index, mig.uuid if mig is not None else None)
        if key in named_at:
            what = f"GPU {gpu.physical_index}" if mig is None else f"MIG device {mig.uuid}"
            warnings.append(
                VisibilityWarning(
                    "duplicate",
                    f"{CVD} entries {named_at[key] + 1} and {position + 1} both name {what}: "
                    "a repeated device makes the driver hide every GPU.",
                )
            )
            return [], None, uses_integers
        named_at[key] = position
        chosen.append(target)
        if isinstance(entry, IntegerEntry) and entry.ignored:
            warnings.append(_ignored_rest(position, raw, entry))
    return chosen, None, uses_integers


def _ignored_rest(position: int, raw: str, entry: IntegerEntry) -> VisibilityWarning:
    """An entry the driver reads as a number and a rest it drops: ``1 2``, ``0:1``."""
    if entry.ignored.startswith(":"):
        why = (
            "it looks like a MIG device (GPU:instance), but the driver has no such form: "
            "name a MIG instance by its MIG- UUID"
        )
    elif entry.ignored.lstrip(" \t").isdigit() or " " in entry.ignored:
        why = "GPUs are separated by commas only"
    else:
        why = "the driver reads a number up to its first other character"
    return VisibilityWarning(
        "ignored-rest",
        f"{CVD} entry {position + 1} ({raw!r}) is read as {entry.value}, ignoring "
        f"{entry.ignored!r}: {why}.",
    )


def _lookup(
    entry: object, ordering: CudaOrder, gpus: Sequence[GpuSample], driver_major: int | None
) -> tuple[Target | None, str]:
    if isinstance(entry, InvalidEntry):
        return None, entry.reason
    if isinstance(entry, IntegerEntry):
        count = len(ordering.gpus)
        if entry.value >= count:
            known = f"0-{count - 1}" if count else "none"
            return None, f"is GPU {entry.value}, but this machine has {count} (valid: {known})"
        return (ordering.gpus[entry.value], None), ""
    if isinstance(entry, GpuUuidEntry):
        gpu, reason = _gpu_by_prefix(entry.prefix, gpus)
        return ((gpu, None), "") if gpu is not None else (None, reason)
    if isinstance(entry, MigUuidEntry):
        if driver_major is not None and driver_major < MIG_UUID_SINCE:
            return None, (
                "uses the MIG-<uuid> form, which drivers before R470 do not accept "
                "(use MIG-GPU-<gpu uuid>/<GPU instance>/<compute instance>)"
            )
        matches = [
            (g, m) for g in gpus for m in g.mig_devices if (m.uuid or "").startswith(entry.prefix)
        ]
        if len(matches) == 1:
            return matches[0], ""
        return None, _match_problem(len(matches), "MIG device")
    if isinstance(entry, LegacyMigEntry):
        gpu, reason = _gpu_by_prefix(entry.gpu_prefix, gpus)
        if gpu is None:
            return None, reason
        for mig in gpu.mig_devices:
            if (mig.gpu_instance_id, mig.compute_instance_id) == (
                entry.gpu_instance_id,
                entry.compute_instance_id,
            ):
                return (gpu, mig), ""
        return None, (
            f"names GPU instance {entry.gpu_instance_id} / compute instance "
            f"{entry.compute_instance_id}, which GPU {gpu.physical_index} does not have"
        )
    return None, "is not understood"


def _gpu_by_prefix(prefix: str, gpus: Sequence[GpuSample]) -> tuple[GpuSample | None, str]:
    """Rule 11-12: a full UUID or any leading part of it that names exactly one GPU."""
    matches = [g for g in gpus if g.uuid is not None and g.uuid.startswith(prefix)]
    if len(matches) == 1:
        return matches[0], ""
    return None, _match_problem(len(matches), "GPU", matches)


def _match_problem(count: int, kind: str, matches: Sequence[GpuSample] = ()) -> str:
    if count == 0:
        return f"matches no {kind}'s UUID (UUIDs are case-sensitive, 'GPU-' included)"
    which = ", ".join(f"GPU {g.physical_index}" for g in matches)
    return f"matches {count} {kind}s{f' ({which})' if which else ''}: give more characters"


def _expand_mig(
    targets: list[Target],
    driver_major: int | None,
    unset: bool,
    warnings: list[VisibilityWarning],
) -> list[Target]:
    """Rules 21-25: what MIG-mode GPUs and MIG devices become, by driver version."""
    units: list[Target] = []
    for gpu, mig in targets:
        if mig is not None or not gpu.mig_mode_current:
            units.append((gpu, mig))
            continue
        if not gpu.mig_devices:
            warnings.append(
                VisibilityWarning(
                    "mig-no-instances",
                    f"GPU {gpu.physical_index} is in MIG mode without MIG instances, so it "
                    "exposes no CUDA device.",
                )
            )
            continue
        if not unset:
            warnings.append(
                VisibilityWarning(
                    "mig-expanded",
                    f"GPU {gpu.physical_index} is in MIG mode; naming the whole GPU selects its "
                    "MIG instances (undocumented: name MIG-<uuid> entries to be sure).",
                )
            )
        units.extend((gpu, device) for device in gpu.mig_devices)
    mig_units = [unit for unit in units if unit[1] is not None]
    if not mig_units:
        return units
    if driver_major is not None and driver_major < MANY_MIG_SINCE:
        first_gpu, first_mig = mig_units[0]
        hidden = len(units) - 1
        if hidden:
            warnings.append(
                VisibilityWarning(
                    "mig-single-instance",
                    f"With driver R{driver_major} (before R570) a CUDA process sees a single "
                    f"MIG instance: {first_mig.uuid if first_mig else '?'} on GPU "
                    f"{first_gpu.physical_index}. The {hidden} other device(s) are hidden, "
                    "GPUs without MIG included.",
                )
            )
        return [mig_units[0]]
    kept: list[Target] = []
    instances: set[tuple[int, int | None]] = set()
    for gpu, mig in units:
        if mig is not None:
            instance = (gpu.physical_index, mig.gpu_instance_id)
            if instance in instances:
                warnings.append(
                    VisibilityWarning(
                        "mig-one-ci-per-gi",
                        f"Several compute instances of GPU instance {mig.gpu_instance_id} on "
                        f"GPU {gpu.physical_index} are listed; CUDA picks one of them.",
                    )
                )
                continue
            instances.add(instance)
        kept.append((gpu, mig))
    if len(kept) > MAX_MIG_DEVICES:
        kept = kept[:MAX_MIG_DEVICES]
    if any(mig is None for _, mig in kept):
        warnings.append(
            VisibilityWarning(
                "mig-order-uncertain",
                "Where CUDA places MIG instances among whole GPUs is undocumented; gputop puts "
                "them at their GPU's place.",
            )
        )
    return kept


def _order_warnings(ordering: CudaOrder, cuda_device_order: str | None) -> list[VisibilityWarning]:
    """Rules 10 and 14-17: integer indices follow CUDA's order, not nvidia-smi's."""
    if not ordering.fastest_first:
        return []
    by_pci = sorted(ordering.gpus, key=lambda g: (g.pci_bus_id or "", g.physical_index))
    differs = [g.physical_index for g in ordering.gpus] != [g.physical_index for g in by_pci]
    setting = "unset" if cuda_device_order is None else repr(cuda_device_order)
    fix = f"Set CUDA_DEVICE_ORDER={PCI_BUS_ID} to make indices match nvidia-smi."
    if differs:
        listing = ", ".join(
            f"{position} is GPU {gpu.physical_index} ({(gpu.name or '?').replace('NVIDIA ', '')})"
            for position, gpu in enumerate(ordering.gpus)
        )
        source = " This is the CUDA driver's own order." if ordering.from_driver else ""
        estimate = (
            " This order is gputop's estimate of the driver's undocumented fastest-first "
            "heuristic (SMs x cores per SM x clock)."
            if not ordering.certain
            else ""
        )
        return [
            VisibilityWarning(
                "fastest-first-differs",
                f"CUDA_DEVICE_ORDER is {setting}, so CUDA numbers GPUs fastest first, not as "
                f"nvidia-smi does: index {listing}.{source}{estimate} {fix}",
            )
        ]
    if not ordering.certain:
        return [
            VisibilityWarning(
                "fastest-first-uncertain",
                f"CUDA_DEVICE_ORDER is {setting} and the GPUs differ, so CUDA numbers them by "
                "an undocumented speed estimate; gputop expects nvidia-smi's order here but "
                f"cannot be sure. {fix}",
            )
        ]
    return []


def _torch_warnings(
    gpus: Sequence[GpuSample], value: str | None, devices: tuple[LogicalDevice, ...]
) -> list[VisibilityWarning]:
    """Where torch's NVML-based helpers would read another card than cuda:N."""
    nvml_order = sorted(gpus, key=lambda g: g.physical_index)
    view = torch_view(value, [g.uuid or "" for g in nvml_order])
    if view.nvml_indices is None:
        return [VisibilityWarning("torch-nvml-mismatch", f"{view.problem}.")]
    problems = []
    wrong = [
        f"cuda:{d.logical_index} they read GPU {view.nvml_indices[d.logical_index]}, "
        f"not GPU {d.physical_index}"
        for d in devices
        if d.mig_uuid is None
        and d.logical_index < len(view.nvml_indices)
        and view.nvml_indices[d.logical_index] != d.physical_index
    ]
    if wrong:
        problems.append(
            "torch's NVML-based helpers (torch.cuda.memory_usage, utilization, temperature, "
            "power_draw) ignore CUDA_DEVICE_ORDER: for " + "; for ".join(wrong)
        )
    if any(d.mig_uuid for d in devices):
        problems.append("torch's NVML-based helpers cannot map MIG devices")
    if len(view.nvml_indices) != len(devices):
        problems.append(
            f"torch.cuda.device_count() says {len(view.nvml_indices)} until CUDA is "
            f"initialised, while the driver exposes {len(devices)}"
        )
    if not problems:
        return []
    return [VisibilityWarning("torch-nvml-mismatch", ". ".join(problems) + ".")]


def _no_access_warning(refused: list[int]) -> VisibilityWarning:
    which = ", ".join(str(index) for index in refused)
    plural = len(refused) > 1
    return VisibilityWarning(
        "no-access",
        f"NVML refused access to GPU{'s' if plural else ''} {which} (no permission, as under "
        f"a device cgroup or container): CUDA here cannot use {'them' if plural else 'it'} "
        "either, so cuda:N counts only the other GPUs.",
    )


def _driver_major(driver_version: str | None) -> int | None:
    if not driver_version:
        return None
    head = driver_version.strip().split(".", 1)[0]
    return int(head) if head.isdigit() else None
