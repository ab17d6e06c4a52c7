"""A step of the wall clock while the dashboard runs does not make your process unsignallable.

The dashboard reads a process's start time once, when it first sees it. A step of the clock
afterwards moves the boot time the kernel reports, and with it the start time every later
read computes: compared to a second, the same process read as another, and ``t`` refused
("its pid now belongs to another process"). Its start in clock ticks since boot, read at
the same time, no clock moves (process_control.py)."""

from __future__ import annotations

import getpass
import subprocess
import sys
from collections.abc import Callable, Iterator

import psutil
import pytest
from helpers.dashboard import first_sample, make_app, stays_true
from helpers.scenarios import minimal_gpu

from gputop.core.process_control import start_ticks
from gputop.tui.widgets.process_table import ProcessTable

STEP_S = 3600.0


@pytest.fixture
def own_process() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()
    child.wait()


@pytest.mark.parametrize("step_s", [STEP_S, -STEP_S], ids=["ahead", "behind"])
async def test_after_a_clock_step_t_then_y_still_terminates_your_own_process(
    scenario_file: Callable[..., str],
    own_process: subprocess.Popen[bytes],
    host_pid_namespace: None,
    monkeypatch: pytest.MonkeyPatch,
    step_s: float,
) -> None:
    process = {"pid": own_process.pid, "used_memory_mib": 100, "type": "C"}
    app = make_app(scenario_file([minimal_gpu(processes=[process])]), user=getpass.getuser())
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        table.focus()
        table.move_cursor(row=0)
        await pilot.pause()
        shown = table.current_process
        assert shown is not None and shown.start_ticks == start_ticks(own_process.pid)

        stepped = psutil._pslinux.boot_time() + step_s  # what /proc/stat says after a step
        monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: stepped)
        assert abs(psutil.Process(own_process.pid).create_time() - shown.start_time) > 60
        await pilot.press("t", "y")

        assert not await stays_true(pilot, lambda: own_process.poll() is None, 5.0)
        assert own_process.returncode == -15
