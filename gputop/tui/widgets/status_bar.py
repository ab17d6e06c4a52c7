"""The top line: host, driver and CUDA versions, the time of the sample, the interval."""

from __future__ import annotations

import time

from rich.cells import set_cell_size
from rich.text import Text
from textual.app import RenderResult
from textual.widgets import Static

from gputop.core.host_stats import host_line
from gputop.core.model import Snapshot
from gputop.core.safe_text import clean
from gputop.core.units import counted
from gputop.tui.render import assembled


class OneLine(Static):
    """A line cut to the width at paint time, with an ellipsis where it is cut: a line shown
    before the first layout (the first sample's is) still fits the screen in the first
    frame, and a resize cuts it again."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.auto_links = False
        self._line: Text | None = None

    def show_line(self, line: Text) -> None:
        self._line = line
        self.update(line, layout=False)  # one line whatever it says: no layout pass

    def render(self) -> RenderResult:
        if self._line is None:
            return super().render()
        line = self._line.copy()
        width = max(self.content_size.width, 1)
        if line.cell_len > width:
            # "8.0…", not "8.0 …"; the ellipsis takes the style of what it replaces
            line.plain = set_cell_size(line.plain, width - 1).rstrip() + "…"
        return line


class StatusBar(OneLine):
    def show_waiting(self) -> None:
        self.update(Text.assemble(("gputop", "bold"), "  waiting for the first sample…"))

    def show(self, snapshot: Snapshot, interval_s: float) -> None:
        clock = time.strftime("%H:%M:%S", time.localtime(snapshot.timestamp))
        simulated = snapshot.simulated
        line = assembled(  # the host's and the driver's words cleaned: no markup, no controls
            ("gputop", "bold"),
            "  ",
            (clean(snapshot.host), "bold cyan"),
            f"  driver {clean(snapshot.driver_version or 'N/A')}",
            f"  CUDA {clean(snapshot.cuda_driver_version_text or 'N/A')}",
            f"  {counted(len(snapshot.gpus), 'GPU')}",
            f"  {clock}",
            (f"  every {interval_s:g} s", "dim"),
            (f"  simulated: {clean(simulated)}", "yellow") if simulated else "",
        )
        self.show_line(line)


class HostBar(OneLine):
    """The host line: CPU load, memory, swap, uptime (gputop.core.host_stats)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: str | None = None

    def show(self, snapshot: Snapshot) -> None:
        stats = snapshot.host_stats
        text = "host: not read" if stats is None else host_line(stats)
        if text != self._shown:  # a steady host repaints nothing
            self._shown = text
            self.show_line(Text(text, style="dim"))
