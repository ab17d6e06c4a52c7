"""``H`` in the process table: the highlighted process's GPU memory over the last hour, day or
week, with its GPU time, peak, mean SM % and idle time (docs/history.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text

from gputop.core.history.process_history import ProcessHistory, read_process_history
from gputop.core.model import GpuProcess
from gputop.core.units import NA, duration, human_bytes
from gputop.tui.safe import plain, plain_argv
from gputop.tui.screens.history_window import HistoryWindowScreen, memory_plot, time_line


class ProcessHistoryScreen(HistoryWindowScreen):
    def __init__(
        self, process: GpuProcess, store: Path, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.process = process

    def subject(self) -> Text:
        process = self.process
        return Text.assemble(
            (f"Process {process.pid} ", "bold"),
            plain(process.user or "?"),
            " ",
            plain_argv(process.command[:4]),
        )

    def read_history(self, window_s: float, now: float, columns: int) -> ProcessHistory:
        process = self.process
        return read_process_history(
            self.store, process.pid, process.start_time, window_s, now, columns
        )

    def render_history(self, found: object) -> Text:
        assert isinstance(found, ProcessHistory)
        return render_process_history(found)


def render_process_history(history: ProcessHistory) -> Text:
    if history.problem is not None:
        return Text(history.problem, style="yellow")
    summary = history.summary
    if summary is None:
        return Text("Nothing was recorded for this process in this window.", style="dim")
    known = [value for value in history.memory_used_bytes if value is not None]
    top = max(known) if known else None
    sm = NA if summary.mean_sm_util is None else f"{summary.mean_sm_util:.0f} %"
    return Text("\n").join(
        [
            Text("GPU memory (all its cards)", style="bold"),
            *memory_plot(history.memory_used_bytes, top),
            time_line(history.since, history.until, len(history.memory_used_bytes)),
            Text(""),
            Text.assemble(
                f"GPU time {duration(summary.gpu_seconds)}",
                f"  mean {human_bytes(summary.mean_memory_bytes)}",
                f"  peak {human_bytes(summary.peak_memory_bytes)}",
                f"  SM {sm}",
                (
                    f"  idle {duration(summary.idle_held_seconds)}" if summary.idle else "",
                    "red",
                ),
            ),
        ]
    )
