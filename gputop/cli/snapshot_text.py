"""``gputop snapshot`` as text: a line per GPU with its processes under it, like gpustat;
with ``--watch``, reprinted in place."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable

from gputop.core.claims.view import card_claim_text
from gputop.core.clock_events import badge_labels
from gputop.core.health import verdict, xids_since
from gputop.core.model import Activity, GpuProcess, GpuSample, Snapshot
from gputop.core.safe_text import clean, clean_argv
from gputop.core.units import NA, celsius, duration, human_bytes, memory_pair, percent, power_pair

PROCESS_HEADER = (
    f"{'PID':>9}  {'USER':<10} {'TYPE':<4} {'GPU MEM':>9} {'SM':>4} {'CPU':>5} "
    f"{'HOST MEM':>8} {'ELAPSED':>10}  COMMAND"
)

REFUSED = "no permission, or not supported"


def render_snapshot(snapshot: Snapshot, width: int | None = None) -> str:
    """The whole screen; lines are cut at ``width`` when one is given (a terminal's)."""
    lines = [_header(snapshot)]
    for gpu in snapshot.gpus:
        lines.append(_gpu_line(gpu))
        claimed = card_claim_text(gpu, time.time())
        if claimed:
            lines.append(f"{'':4}{claimed}")  # docs/claims.md
        lines.extend(_mig_lines(gpu))
        health = _health_line(gpu)
        if health:
            lines.append(health)
        if gpu.lost or gpu.no_access:
            continue
        if not gpu.processes_listed:
            lines.append(f"{'':9}  (NVML will not list compute processes here: {REFUSED})")
        if gpu.processes:
            lines.append(PROCESS_HEADER)
            lines.extend(_process_line(p, snapshot.timestamp, gpu) for p in _by_memory(gpu))
        elif gpu.processes_listed:
            lines.append(f"{'':9}  (no processes)")
    if not snapshot.gpus:
        lines.append("No NVIDIA GPUs found.")
    if width is None:
        return "\n".join(lines)
    return "\n".join(_clip(line, width) for line in lines)


def _header(snapshot: Snapshot) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snapshot.timestamp))
    parts = [
        clean(snapshot.host),
        stamp,
        f"driver {clean(snapshot.driver_version or NA)}",
        f"CUDA {clean(snapshot.cuda_driver_version_text or NA)}",
    ]
    if snapshot.simulated:
        parts.append(f"[simulated: {clean(snapshot.simulated)}]")
    return "  ".join(parts)


def _gpu_line(gpu: GpuSample) -> str:
    ident = f"[{gpu.physical_index}] {clean(gpu.name or NA):<24} {clean(gpu.short_uuid or NA):<12}"
    if gpu.lost:
        return f"{ident}  LOST: NVML reports this GPU as lost (it may have fallen off the bus)"
    if gpu.no_access:
        return f"{ident}  NO ACCESS: NVML refused this GPU (no permission; a cgroup or container)"
    fan = "fan N/A" if gpu.fan_percent is None else f"fan {gpu.fan_percent:>3}%"
    power = power_pair(gpu.power_w, gpu.power_limit_w)
    pstate = NA if gpu.performance_state is None else f"P{gpu.performance_state}"
    mig = "  MIG" if gpu.mig_mode_current else ""
    memory = memory_pair(gpu.memory_used_bytes, gpu.memory_total_bytes)
    return (
        f"{ident}  {celsius(gpu.temperature_c):>5}  {fan}  "
        f"util {percent(gpu.utilization_gpu_percent)}  {memory:>18}  "
        f"{power:>13}  {pstate}{mig}{_activity(gpu.activity)}{_throttle(gpu)}"
    )


def _activity(activity: Activity) -> str:
    """GPM's SM active, tensor active and DRAM (docs/activity.md); nothing without GPM."""
    if not activity.gpm:
        return ""
    figures = (
        ("SM", activity.sm_active_percent),
        ("TC", activity.tensor_active_percent),
        ("DRAM", activity.dram_active_percent),
    )
    return "  " + " ".join(f"{name} {NA if v is None else f'{v:.0f}%'}" for name, v in figures)


def _throttle(gpu: GpuSample) -> str:
    labels = badge_labels(gpu.clock_event_mask)
    return f"  throttled: {', '.join(labels)}" if labels else ""


def _health_line(gpu: GpuSample) -> str | None:
    """A line for a card that is not ok (docs/health.md): its reasons, what to do first."""
    result = verdict(gpu.health)
    if not result.reasons:
        return None
    mark = "✖" if result.level == "critical" else "⚠"
    reasons = "; ".join(reason.text for reason in result.reasons)
    action = result.action or ""
    return f"{'':4}{mark} health {result.level}: {reasons}. {action[:1].upper()}{action[1:]}"


def _mig_lines(gpu: GpuSample) -> list[str]:
    return [
        f"{'':4}MIG {mig.mig_index}  GI {mig.gpu_instance_id}  CI {mig.compute_instance_id}  "
        f"{clean(_profile(mig.name)):<10} {clean(mig.uuid or NA)}  "
        f"{memory_pair(mig.memory_used_bytes, mig.memory_total_bytes)}"
        f"{_activity(mig.activity)}"
        for mig in gpu.mig_devices
    ]


def _profile(mig_name: str | None) -> str:
    """ "NVIDIA A100-SXM4-80GB MIG 3g.40gb" -> "3g.40gb": the rest is on the GPU line."""
    if not mig_name:
        return NA
    return mig_name.rsplit(" ", 1)[-1] if " MIG " in mig_name else mig_name


def _by_memory(gpu: GpuSample) -> list[GpuProcess]:
    return sorted(gpu.processes, key=lambda p: (-(p.used_memory_bytes or 0), p.pid))


def _process_line(process: GpuProcess, now: float, gpu: GpuSample | None = None) -> str:
    gpu_memory = NA if process.used_memory_bytes is None else human_bytes(process.used_memory_bytes)
    sm = NA if process.sm_util_percent is None else f"{process.sm_util_percent}%"
    cpu = NA if process.cpu_percent is None else f"{process.cpu_percent:.0f}%"
    elapsed = None if process.start_time is None else now - process.start_time
    command = clean_argv(process.command) if process.command else f"({clean(process.hint or NA)})"
    if process.mig_uuid is not None:
        command = f"[GI {process.gpu_instance_id}] {command}"
    xids = xids_since(gpu.health if gpu else None, process.start_time)
    if xids:  # its card reported these since it started (docs/health.md)
        command = f"[Xid {', '.join(map(str, xids))}] {command}"
    return (
        f"{process.pid:>9}  {clean(process.user or '?')[:10]:<10} {process.type.value:<4} "
        f"{gpu_memory:>9} {sm:>4} {cpu:>5} {human_bytes(process.host_memory_bytes):>8} "
        f"{duration(elapsed):>10}  {command}"
    )


def _clip(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


CLEAR_HOME = "\x1b[H\x1b[J"


def fit_rows(text: str) -> str:
    """A ``--watch`` frame on a terminal: at most its height less the cursor's line, so that
    its first line (the host, the time) is never scrolled away; the last line says how many
    were left out. On a file or a pipe, the whole frame."""
    if not sys.stdout.isatty():
        return text
    rows = shutil.get_terminal_size().lines - 1
    lines = text.split("\n")
    if rows < 2 or len(lines) <= rows:
        return text
    left = len(lines) - rows + 1
    return "\n".join([*lines[: rows - 1], f"… {left} more lines: a taller terminal shows them"])


def reprint_every(interval_s: float, frame: Callable[[], str]) -> None:
    """Write ``frame()`` and a line end every ``interval_s`` until Ctrl-C (KeyboardInterrupt
    ends the loop, and the command with 130, as main says)."""
    while True:
        started = time.monotonic()
        sys.stdout.write(frame() + "\n")
        sys.stdout.flush()
        time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
