"""What a person needs to know about one GPU process: its card, its own CUDA view, its jobs.

For the dashboard's process detail (enter on a process). The ranks of one distributed job
share their rendezvous (``MASTER_ADDR:MASTER_PORT`` and torchelastic's run id, read from each
process's environment: gputop.core.sampling.process_env); they are listed together with the
job's total GPU memory. Every string from outside is cleaned here.
"""

from __future__ import annotations

from gputop.core.model import GpuProcess, Snapshot
from gputop.core.records import frozen
from gputop.core.safe_text import clean, clean_argv
from gputop.core.units import NA, human_bytes


@frozen(slots=False)
class DetailLine:
    text: str
    style: str = ""
    """gputop's own style name ("" plain, "warning", "dim", "heading"), never from data."""


def rendezvous_key(process: GpuProcess) -> tuple[str, int, str] | None:
    """What the ranks of one distributed job share; None for a process without one."""
    cuda = process.cuda
    if cuda is None or cuda.master_port is None:
        return None
    return (cuda.master_addr or "", cuda.master_port, cuda.run_id or "")


def job_ranks(snapshot: Snapshot, process: GpuProcess) -> list[GpuProcess]:
    """Every process of the same distributed job, by rank (the process itself included)."""
    key = rendezvous_key(process)
    if key is None:
        return []
    ranks = [p for gpu in snapshot.gpus for p in gpu.processes if rendezvous_key(p) == key]
    return sorted(ranks, key=lambda p: p.cuda.rank if p.cuda and p.cuda.rank is not None else -1)


def describe_process(snapshot: Snapshot, process: GpuProcess) -> list[DetailLine]:
    gpus = {gpu.physical_index: gpu for gpu in snapshot.gpus}
    gpu = gpus.get(process.physical_index)
    used = NA if process.used_memory_bytes is None else human_bytes(process.used_memory_bytes)
    lines = [
        DetailLine(f"PID {process.pid}  user {clean(process.user or '?')}", "heading"),
        DetailLine(clean_argv(process.command) or f"({clean(process.hint or 'unknown')})"),
        DetailLine(
            f"NVML shows it on GPU {process.physical_index}"
            f"  {clean((gpu.name if gpu else None) or '?')}  GPU memory {used}"
        ),
    ]
    cuda = process.cuda
    if cuda is None:
        lines.append(
            DetailLine(
                "Its own CUDA view: unknown (its environment cannot be read: another user's "
                "process, or it ended).",
                "dim",
            )
        )
        return lines
    if cuda.unknown is not None:  # a cut read: unknown, never "unset" (process_env.py)
        lines.append(
            DetailLine(
                f"Its own CUDA view: unknown ({clean(cuda.unknown)}: CUDA_VISIBLE_DEVICES "
                "and CUDA_DEVICE_ORDER could not be read whole).",
                "dim",
            )
        )
        return lines
    lines.append(
        DetailLine("Its own CUDA view (from the environment it was started with):", "heading")
    )
    lines.append(
        DetailLine(
            f"  CUDA_VISIBLE_DEVICES={_shown(cuda.visible_devices)}  "
            f"CUDA_DEVICE_ORDER={_shown(cuda.device_order)}"
        )
    )
    if not cuda.devices:
        lines.append(DetailLine("  no CUDA device is visible to it", "warning"))
    for logical, physical in enumerate(cuda.devices):
        card = gpus.get(physical)
        name = clean((card.name if card else None) or "?")
        short = clean((card.short_uuid if card else None) or "")
        lines.append(DetailLine(f"  cuda:{logical} → GPU {physical}  {name}  {short}".rstrip()))
    if cuda.mismatch:
        lines.append(
            DetailLine(
                f"⚠ NVML shows it on GPU {process.physical_index}, which its own "
                "CUDA_VISIBLE_DEVICES excludes (is CUDA_DEVICE_ORDER what it should be?)",
                "warning",
            )
        )
    if cuda.rank is not None or cuda.world_size is not None:
        lines.append(
            DetailLine(
                f"  rank {_number(cuda.rank)} of {_number(cuda.world_size)}, local rank "
                f"{_number(cuda.local_rank)}, rendezvous {clean(cuda.master_addr or '?')}:"
                f"{_number(cuda.master_port)}"
                + (f", run id {clean(cuda.run_id)}" if cuda.run_id else "")
            )
        )
    ranks = job_ranks(snapshot, process)
    if len(ranks) > 1:
        total = sum(p.used_memory_bytes or 0 for p in ranks)
        lines.append(
            DetailLine(
                f"Its job: {len(ranks)} ranks here, {human_bytes(total)} GPU memory", "heading"
            )
        )
        for rank in ranks:
            memory = NA if rank.used_memory_bytes is None else human_bytes(rank.used_memory_bytes)
            number = rank.cuda.rank if rank.cuda else None
            lines.append(
                DetailLine(
                    f"  rank {_number(number)}  pid {rank.pid}  GPU {rank.physical_index}  {memory}"
                )
            )
    return lines


def job_lines(
    gputop_job: int | None,
    slurm_job: int | None,
    job_name: str | None = None,
    job_status: str | None = None,
) -> list[DetailLine]:
    """``In gputop job 3 (train), running: gputop jobs log 3`` and ``In Slurm job 4242``:
    the jobs the process belongs to (gputop/core/process_jobs.py reads them); none where it
    belongs to none, or its environment cannot be read (another user's process)."""
    lines = []
    if gputop_job is not None:
        text = f"In gputop job {gputop_job}"
        if job_name is not None:
            text += f" ({clean(job_name)})"
        if job_status is not None:
            text += f", {clean(job_status)}"
        lines.append(DetailLine(text, "heading"))
        lines.append(DetailLine(f"  its log: gputop jobs log {gputop_job}", "dim"))
    if slurm_job is not None:
        lines.append(DetailLine(f"In Slurm job {slurm_job}", "heading"))
        lines.append(DetailLine(f"  scontrol show job {slurm_job}", "dim"))
    return lines


def _shown(value: str | None) -> str:
    return "(unset)" if value is None else clean(value)


def _number(value: int | None) -> str:
    return "?" if value is None else str(value)
