"""The top line: host, driver and CUDA versions, the time of the sample, the interval."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from gputop.core.model import Snapshot


class StatusBar(Static):
    def show_waiting(self, interval_s: float) -> None:
        self.update(Text.assemble(("gputop", "bold"), "  waiting for the first sample…"))

    def show(self, snapshot: Snapshot, interval_s: float) -> None:
        clock = time.strftime("%H:%M:%S", time.localtime(snapshot.timestamp))
        line = Text.assemble(
            ("gputop", "bold"),
            "  ",
            (snapshot.host, "bold cyan"),
            f"  driver {snapshot.driver_version or 'N/A'}",
            f"  CUDA {snapshot.cuda_driver_version_text or 'N/A'}",
            f"  {len(snapshot.gpus)} GPUs",
            f"  {clock}",
            (f"  every {interval_s:g} s", "dim"),
        )
        if snapshot.simulated:
            line.append(f"  simulated: {snapshot.simulated}", style="yellow")
        line.truncate(max(self.size.width, 20), overflow="ellipsis")
        self.update(line)
