"""The bare floor for ``make bench``: what any Textual program costs that shows the same GPUs.

One ``Static``, a line per card, from the same NVML (the simulated one: the only gputop code
here is ``gputop.core.fake.load_fake_nvml``, which opens it), read in a worker thread at the
same interval with plain pynvml-shaped calls: no sampler, no snapshot, no psutil. And a
count of the down-arrow keys, so the bench can time a key to the screen. Beside the other
floor (``floor_app.py``: gputop's own sampler under one ``Static``), this one says what
"first frame" and "memory" cost in any Textual app at all (issue 44).

    python tests/bench/bare_app.py SCENARIO_PATH [--interval 1]
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Static

TITLE = "bare Textual"
KEYS_LABEL = "keys pressed:"


def card_lines(nvml: Any) -> list[str]:
    """A line per card, as a small Textual program would print it."""
    lines = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        name = nvml.nvmlDeviceGetName(handle)
        util = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        temperature = nvml.nvmlDeviceGetTemperature(handle, 0)
        power = nvml.nvmlDeviceGetPowerUsage(handle) / 1000
        processes = len(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
        lines.append(
            f"GPU {index}  {name}  {util}%  {memory.used >> 20} / {memory.total >> 20} MiB  "
            f"{temperature}°C  {power:.0f} W  {processes} processes"
        )
    return lines


class BareApp(App[None]):
    BINDINGS = [Binding("down", "count_key", "count"), Binding("q", "quit", "Quit")]

    def __init__(self, nvml: Any, interval_s: float) -> None:
        super().__init__()
        self.nvml = nvml
        self.interval_s = interval_s
        self.keys_pressed = 0
        self.lines: list[str] = []
        self._stop = threading.Event()

    def compose(self) -> ComposeResult:
        yield Static(id="cards")

    def on_mount(self) -> None:
        self._read_forever()

    def on_unmount(self) -> None:
        self._stop.set()

    @work(thread=True, exclusive=True)
    def _read_forever(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            lines = card_lines(self.nvml)
            self.call_from_thread(self._show, lines)
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def _show(self, lines: list[str] | None) -> None:
        if lines is not None:
            self.lines = lines
        head = f"{TITLE}  {len(self.lines)} GPUs  every {self.interval_s:g} s"
        text = "\n".join([head, *self.lines, f"{KEYS_LABEL} {self.keys_pressed}"])
        self.query_one(Static).update(Text(text))

    def action_count_key(self) -> None:
        self.keys_pressed += 1
        self._show(None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    from gputop.core.fake import load_fake_nvml

    nvml = load_fake_nvml(args.scenario)
    nvml.nvmlInit()
    try:
        BareApp(nvml, args.interval).run()
    finally:
        nvml.nvmlShutdown()


if __name__ == "__main__":
    main()
