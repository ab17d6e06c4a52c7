"""The floor for ``make bench``: the least a Textual app can do with the same GPUs.

One ``Static`` that shows a few figures of each sample, read by the same ``NvmlBackend``
(the same simulated GPUs, and psutil for the same live processes) in a worker thread at the
same interval, and a count of the down-arrow keys, so the bench can time a key to the
screen. Whatever gputop costs above this is gputop's own; what this costs is Textual's and
the sampling's.

    python tests/bench/floor_app.py SCENARIO_PATH [--interval 1]
"""

from __future__ import annotations

import argparse
import threading
import time

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from gputop.core.model import Snapshot
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.source import open_backend

KEYS_LABEL = "keys pressed:"


class FloorApp(App[None]):
    BINDINGS = [Binding("down", "count_key", "count"), Binding("q", "quit", "Quit")]

    def __init__(self, backend: NvmlBackend, interval_s: float) -> None:
        super().__init__()
        self.backend = backend
        self.interval_s = interval_s
        self.keys_pressed = 0
        self.snapshot: Snapshot | None = None
        self._stop = threading.Event()

    def compose(self) -> ComposeResult:
        yield Static(id="figures")

    def on_mount(self) -> None:
        self._sample_forever()

    def on_unmount(self) -> None:
        self._stop.set()

    @work(thread=True, exclusive=True)
    def _sample_forever(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            snapshot = self.backend.sample()
            self.call_from_thread(self._show, snapshot)
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def _show(self, snapshot: Snapshot | None) -> None:
        if snapshot is not None:
            self.snapshot = snapshot
        snapshot = self.snapshot
        if snapshot is None:
            return
        lines = [f"floor  {snapshot.host}  {len(snapshot.gpus)} GPUs  every {self.interval_s:g} s"]
        processes = 0
        for gpu in snapshot.gpus:
            processes += len(gpu.processes)
            used = (gpu.memory_used_bytes or 0) >> 20
            lines.append(
                f"GPU {gpu.physical_index}  {gpu.utilization_gpu_percent}%  {used} MiB  "
                f"{gpu.temperature_c}°C  {gpu.power_w} W  {len(gpu.processes)} processes"
            )
        lines.append(f"processes: {processes}")
        lines.append(f"{KEYS_LABEL} {self.keys_pressed}")
        self.query_one(Static).update(Text("\n".join(lines)))

    def action_count_key(self) -> None:
        self.keys_pressed += 1
        self._show(None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    backend = open_backend(args.scenario)
    try:
        FloorApp(backend, args.interval).run()
    finally:
        backend.close()


if __name__ == "__main__":
    main()
