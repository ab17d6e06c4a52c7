"""The environment that pins chosen cards, in a chosen order: the launcher's half.

``CUDA_DEVICE_ORDER=PCI_BUS_ID`` plus ``CUDA_VISIBLE_DEVICES`` with full UUIDs (by default)
names physical cards unambiguously whatever the machine's mix of models; a MIG instance is
pinned by its ``MIG-`` UUID (docs/cuda-visibility.md, "Launching"). The answer is
checked by running it back through the driver's rules, so a launch preview can never
promise a mapping the rules would not give.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputop.core.model import GpuSample
from gputop.core.visibility.model import Pinning, SelectionError
from gputop.core.visibility.order import PCI_BUS_ID
from gputop.core.visibility.resolve import resolve_visibility


def pin_environment(
    gpus: Sequence[GpuSample],
    selection: Sequence[int | str],
    use_uuids: bool = True,
    driver_version: str | None = None,
) -> Pinning:
    """``selection``: physical indices or MIG UUIDs, in the cuda:N order wanted."""
    if not selection:
        raise SelectionError("No GPU selected: choose at least one card.")
    by_index = {gpu.physical_index: gpu for gpu in gpus}
    entries: list[str] = []
    wanted: list[tuple[int, str | None]] = []
    for item in selection:
        if isinstance(item, str):
            gpu, mig_uuid = _mig(gpus, item)
            entries.append(mig_uuid)
            wanted.append((gpu.physical_index, mig_uuid))
            continue
        found = by_index.get(item)
        if found is None:
            known = ", ".join(str(i) for i in sorted(by_index)) or "none"
            raise SelectionError(f"There is no GPU {item}; this machine has GPUs {known}.")
        gpu = found
        if gpu.lost:
            raise SelectionError(f"GPU {item} is lost (NVML cannot reach it); choose another.")
        if gpu.no_access:
            raise SelectionError(
                f"GPU {item} refuses access (no permission): CUDA here cannot use it either."
            )
        if gpu.mig_mode_current:
            raise SelectionError(
                f"GPU {item} is in MIG mode: choose one of its MIG instances instead."
            )
        if use_uuids and gpu.uuid is None:
            raise SelectionError(f"GPU {item} has no UUID NVML could read; pin it by index.")
        entries.append(gpu.uuid if use_uuids and gpu.uuid else str(item))
        wanted.append((gpu.physical_index, None))
    if len(set(wanted)) != len(wanted):
        raise SelectionError("A GPU is chosen twice; each card can be pinned once.")
    env = {"CUDA_DEVICE_ORDER": PCI_BUS_ID, "CUDA_VISIBLE_DEVICES": ",".join(entries)}
    visibility = resolve_visibility(gpus, driver_version, env["CUDA_VISIBLE_DEVICES"], PCI_BUS_ID)
    got = [(d.physical_index, d.mig_uuid) for d in visibility.devices]
    if got == wanted:
        return Pinning(env=env, devices=visibility.devices)
    hidden = [w.message for w in visibility.warnings if w.code in MIG_HIDES]
    if hidden and got and set(got) <= set(wanted):
        # Rules 21-22: the driver exposes only some of the pinned MIG devices. The launch
        # may still be what the person wants (one instance per process): say it, not refuse.
        return Pinning(env=env, devices=visibility.devices, warnings=tuple(hidden))
    reasons = " ".join(w.message for w in visibility.warnings)
    raise SelectionError(f"These cards cannot all be pinned together: {reasons}")


MIG_HIDES = ("mig-single-instance", "mig-one-ci-per-gi")
"""Warnings of gputop.core.visibility.resolve for pinned MIG devices the driver hides."""


def _mig(gpus: Sequence[GpuSample], mig_uuid: str) -> tuple[GpuSample, str]:
    for gpu in gpus:
        for device in gpu.mig_devices:
            if device.uuid == mig_uuid:
                return gpu, mig_uuid
    raise SelectionError(f"There is no MIG device {mig_uuid} on this machine.")
