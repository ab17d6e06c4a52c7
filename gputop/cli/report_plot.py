"""``gputop report --plot``: each GPU's utilisation and memory over the window, as text.

Two rows of block characters per GPU, one column per slice of the window, as the
dashboard's sparklines look. Drawn without a plotting library: plotext would add a
dependency (and textual-plotext, its Textual wrapper, has not been released since 2024) for
what eight block characters say at this size. docs/history.md.
"""

from __future__ import annotations

from gputop.core.history.series import GAP, GpuSeries, bars
from gputop.core.units import human_bytes, local_time

LABEL_WIDTH = 12
MIN_COLUMNS = 10


def plot_columns(terminal_width: int | None) -> int:
    """How many slices fit beside the labels and the figures (60 off a terminal)."""
    if terminal_width is None:
        return 60
    return max(MIN_COLUMNS, terminal_width - LABEL_WIDTH - 26)


def render_plot(series: list[GpuSeries], since: float, until: float, columns: int) -> str:
    slice_s = (until - since) / columns
    lines = [
        f"GPU utilisation and memory, {local_time(since, seconds=False)} to "
        f"{local_time(until, seconds=False)} "
        f"(one column: {_span(slice_s)}; {GAP} nothing recorded)"
    ]
    if not series:
        lines.append("Nothing was recorded in this window.")
    for gpu in series:
        known_util = [value for value in gpu.utilization_percent if value is not None]
        mean = f"mean {sum(known_util) / len(known_util):3.0f} %" if known_util else "mean N/A"
        lines.append(
            f"{f'GPU {gpu.physical_index}':<6}util {bars(gpu.utilization_percent, 100.0)} {mean}"
        )
        known_memory = [value for value in gpu.memory_used_bytes if value is not None]
        top = gpu.memory_total_bytes or (max(known_memory) if known_memory else None)
        most = f"at most {human_bytes(int(max(known_memory)))}" if known_memory else "N/A"
        total = f" of {human_bytes(gpu.memory_total_bytes)}" if gpu.memory_total_bytes else ""
        lines.append(f"{'':<6}mem  {bars(gpu.memory_used_bytes, top)} {most}{total}")
    return "\n".join(lines)


def _span(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
