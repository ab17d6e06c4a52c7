"""The top line: host, driver and CUDA versions, the time of the sample, the interval."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import RenderResult
from textual.widgets import Static

from gputop.core.host_stats import host_line
from gputop.core.model import Snapshot
from gputop.core.safe_text import clean


class StatusBar(Static):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.auto_links = False
        self._line: Text | None = None

    def show_waiting(self, interval_s: float) -> None:
        self.update(Text.assemble(("gputop", "bold"), "  waiting for the first sample…"))

    def show(self, snapshot: Snapshot, interval_s: float) -> None:
        clock = time.strftime("%H:%M:%S", time.localtime(snapshot.timestamp))
        line = Text.assemble(
            ("gputop", "bold"),
            "  ",
            (clean(snapshot.host), "bold cyan"),
            f"  driver {clean(snapshot.driver_version or 'N/A')}",
            f"  CUDA {clean(snapshot.cuda_driver_version_text or 'N/A')}",
            f"  {len(snapshot.gpus)} GPUs",
            f"  {clock}",
            (f"  every {interval_s:g} s", "dim"),
        )
        if snapshot.simulated:
            line.append(f"  simulated: {clean(snapshot.simulated)}", style="yellow")
        self._line = line
        self.update(line, layout=False)  # one line whatever it says: no layout pass

    def render(self) -> RenderResult:
        """The line cut to the width at paint time: a sample shown before the first layout
        (the first one is) still fits the screen in the first frame."""
        if self._line is None:
            return super().render()
        line = self._line.copy()
        line.truncate(max(self.size.width, 1), overflow="ellipsis")
        return line


class HostBar(Static):
    """The host line: CPU load, memory, swap, uptime (gputop.core.host_stats)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.auto_links = False
        self._shown: str | None = None

    def show(self, snapshot: Snapshot) -> None:
        stats = snapshot.host_stats
        text = "host: not read" if stats is None else host_line(stats)
        if text != self._shown:  # a steady host repaints nothing
            self._shown = text
            self.update(Text(text, style="dim", no_wrap=True, overflow="ellipsis"), layout=False)
