"""Inside a Slurm allocation: Slurm's physical cards → CUDA_VISIBLE_DEVICES → cuda:N.

Slurm hands a job its cards as ``SLURM_JOB_GPUS`` (``SLURM_STEP_GPUS`` inside an ``srun``
step), the node's GPU indices. With ``ConstrainDevices=yes`` NVML in the job sees only its
own cards, numbered 0..k-1, and ``CUDA_VISIBLE_DEVICES`` is in that space; without it,
``CUDA_VISIBLE_DEVICES`` holds the node's indices (docs/slurm.md). This module tells the two
apart and says, for each cuda:N, which node GPU it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from gputop.core.records import frozen
from gputop.core.visibility.model import Visibility

CVD = "CUDA_VISIBLE_DEVICES"


@frozen
class AllocatedDevice:
    logical_index: int
    """cuda:N."""
    nvml_index: int
    """The GPU's index as NVML (and nvidia-smi) number it in this process's view."""
    node_index: int
    """The node's GPU index: Slurm's IDX, what the node's nvidia-smi says."""
    slurm_gave_it: bool


@frozen
class AllocationView:
    job_id: str
    variable: str
    """SLURM_STEP_GPUS inside a step, else SLURM_JOB_GPUS."""
    slurm_gpus: tuple[int, ...]
    renumbered: bool
    """NVML here sees only the job's cards, numbered 0..k-1 (device cgroup)."""
    devices: tuple[AllocatedDevice, ...]
    warnings: tuple[str, ...]


def slurm_gpus(
    environ: Mapping[str, str], names: Sequence[str] = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS")
) -> tuple[str, tuple[int, ...]] | None:
    """(variable, node GPU indices) from the first of ``names`` that lists them, if any."""
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            parts = [part.strip() for part in value.split(",")]
            if all(part.isdigit() and len(part) <= 6 for part in parts):
                return name, tuple(int(part) for part in parts)
    return None


def explain_allocation(
    environ: Mapping[str, str] | None,
    nvml_gpu_count: int,
    visibility: Visibility,
) -> AllocationView | None:
    """The allocation's mapping and its pitfalls; ``None`` outside a Slurm job with GPUs."""
    env = os.environ if environ is None else environ
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    found = slurm_gpus(env)
    if not job_id or found is None:
        return None
    variable, given = found
    ordered = sorted(set(given))
    renumbered = nvml_gpu_count == len(ordered) and ordered != list(range(nvml_gpu_count))
    devices = tuple(
        AllocatedDevice(
            logical_index=device.logical_index,
            nvml_index=device.physical_index,
            node_index=node,
            slurm_gave_it=node in given,
        )
        for device in visibility.devices
        for node in [_node_index(device.physical_index, ordered, renumbered)]
    )
    return AllocationView(
        job_id=job_id,
        variable=variable,
        slurm_gpus=given,
        renumbered=renumbered,
        devices=devices,
        warnings=tuple(_warnings(env, variable, given, renumbered, devices)),
    )


def _node_index(nvml_index: int, ordered: Sequence[int], renumbered: bool) -> int:
    if renumbered and 0 <= nvml_index < len(ordered):
        return ordered[nvml_index]
    return nvml_index


def _warnings(
    env: Mapping[str, str],
    variable: str,
    given: Sequence[int],
    renumbered: bool,
    devices: Sequence[AllocatedDevice],
) -> list[str]:
    shown = ",".join(str(index) for index in given)
    warnings: list[str] = []
    if renumbered:
        pairs = ", ".join(
            f"GPU {d.nvml_index} here is the node's GPU {d.node_index}" for d in devices
        )
        warnings.append(
            "NVML in this job sees only its own cards and numbers them from 0: nvidia-smi, "
            f"gputop and every tool that reads NVML indices here say {pairs or 'other numbers'}"
            f" (the node's numbering: Slurm's {variable}={shown}, the node's nvidia-smi)."
        )
    outside = [d for d in devices if not d.slurm_gave_it]
    if outside:
        cards = ", ".join(
            f"cuda:{d.logical_index} is the node's GPU {d.node_index}" for d in outside
        )
        cause = (
            f"{CVD} is not set"
            if env.get(CVD) is None
            else f"{CVD}={env.get(CVD)} does not match {variable}={shown}"
        )
        warnings.append(
            f"{cards}, which Slurm did not give this job ({cause}): it may be another job's."
        )
    if any(index >= len(given) for index in given):
        first = next(d for d in devices if d.slurm_gave_it) if devices else None
        example = (
            f"its GPU {first.node_index} is cuda:{first.logical_index}, not cuda:{first.node_index}"
            if first is not None and first.node_index != first.logical_index
            else f"use cuda:0..cuda:{len(given) - 1}"
        )
        warnings.append(
            f"cuda:N counts only the cards this job sees: {example}. Code that uses "
            f"{variable} or an nvidia-smi index as cuda:N picks the wrong card, or none."
        )
    return warnings


def describe_allocation(view: AllocationView) -> list[str]:
    """The explanation as plain lines (cleaned by the caller's renderer as any text)."""
    shown = ",".join(str(index) for index in view.slurm_gpus)
    how = (
        "NVML here sees only these, renumbered from 0"
        if view.renumbered
        else "NVML here sees every card of the node"
    )
    lines = [f"Slurm job {view.job_id}: {view.variable}={shown} (the node's GPUs); {how}."]
    for device in view.devices:
        mark = "" if device.slurm_gave_it else "  (not this job's)"
        lines.append(
            f"  cuda:{device.logical_index} → GPU {device.nvml_index} here → the node's GPU "
            f"{device.node_index}{mark}"
        )
    lines.extend(f"warning: {warning}" for warning in view.warnings)
    return lines


def allocation_json(view: AllocationView) -> dict[str, object]:
    return {
        **asdict(view),
        "slurm_gpus": list(view.slurm_gpus),
        "devices": [asdict(d) for d in view.devices],
        "warnings": list(view.warnings),
    }
