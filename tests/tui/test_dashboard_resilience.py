"""The dashboard never dies on data: failing workers and samples are said once, it goes on.

And where it must stop, it restores the terminal and exits non-zero with one line. Without
a terminal it refuses to start and points to ``gputop snapshot``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.dashboard import first_sample, make_app
from helpers.jobs import asked_job
from helpers.pty_run import GPUTOP, run_in_pty
from helpers.waiting import pilot_wait_for

from gputop.core.errors import NvmlUnavailableError
from gputop.core.jobs.logs import LogFollower
from gputop.core.jobs.store import JobStore
from gputop.core.sampling.source import open_backend
from gputop.tui.app import GputopApp
from gputop.tui.screens.job_log import JobLogScreen
from gputop.tui.widgets.torch_panel import DriverProbe

BIG = (160, 48)


def messages(app: GputopApp) -> list[str]:
    return [notification.message for notification in app._notifications]


class FlakyBackend:
    """The real simulated backend, whose driver stops answering while ``failing`` is set."""

    def __init__(self) -> None:
        self._backend = open_backend("v100x4", environ={"GPUTOP_FAKE_TIME": "30"})
        self.failing = threading.Event()
        self.failures = 0

    def sample(self) -> Any:
        if self.failing.is_set():
            self.failures += 1
            raise NvmlUnavailableError("NVML: the driver does not answer (GPU is lost)")
        return self._backend.sample()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


async def test_a_sampling_failure_is_said_once_and_its_recovery_too() -> None:
    backend = FlakyBackend()
    backend.failing.set()
    app = GputopApp(backend, interval_s=0.2, probes=False, user="alice", environ={})  # type: ignore[arg-type]
    async with app.run_test(size=BIG) as pilot:
        await pilot_wait_for(pilot, lambda: backend.failures >= 4, "four failed samples")
        await pilot.pause()
        failed = [m for m in messages(app) if m.startswith("Sampling failed")]
        assert failed == [
            "Sampling failed: NVML: the driver does not answer (GPU is lost). gputop keeps "
            "trying and says when it works again."
        ]
        assert app.is_running
        backend.failing.clear()
        await pilot_wait_for(pilot, lambda: app.snapshot is not None, "a sample once it works")
        await pilot.pause()
        assert messages(app).count("Sampling works again.") == 1
    backend.close()


async def test_a_worker_that_raises_is_said_once_and_the_dashboard_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object) -> object:
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(DriverProbe, "probe", broken)
    app = make_app("v100x4", probes=True)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)

        def said() -> bool:
            return any("torch check failed" in m for m in messages(app))

        await pilot_wait_for(pilot, said, "the failure notice")
        assert messages(app) == [
            "The CUDA and torch check failed (RuntimeError: probe exploded); the dashboard goes on."
        ]
        await pilot.press("right")  # still answering keys
        assert app.is_running


async def test_a_worker_failing_again_and_again_is_said_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[float] = []

    def broken(self: LogFollower) -> object:
        calls.append(time.monotonic())
        raise ValueError("bad log")

    monkeypatch.setattr(LogFollower, "read", broken)
    store = JobStore.open()
    try:
        job = store.create_job(
            asked_job(
                name="j",
                command=["true"],
                cwd=str(tmp_path),
                uuids=["GPU-5a9e5b38-bd6d-2f23-3b22-d42f6e26aa55"],
            )
        )
    finally:
        store.close()
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        app.push_screen(JobLogScreen(job))
        await pilot_wait_for(pilot, lambda: len(calls) >= 3, "three failed reads")
        await pilot.pause()
        assert [m for m in messages(app) if "log" in m] == [
            "Reading the job's log failed (ValueError: bad log); the dashboard goes on."
        ]
        assert isinstance(app.screen, JobLogScreen)


# -- stopping: one line, the terminal restored, a non-zero status -------------------------------

CRASHING = textwrap.dedent(
    """
    import sys
    from gputop.tui.widgets.status_bar import StatusBar
    def show(self, snapshot, interval_s):
        raise KeyError("a bug in a widget")
    StatusBar.show = show
    from gputop.cli.main import main
    sys.exit(main([]))
    """
)


def dashboard_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("GPUTOP_DEBUG", "TMUX", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
    }
    env.update(
        GPUTOP_FAKE="v100x4",
        GPUTOP_FAKE_TIME="30",
        GPUTOP_STATE_DIR=str(tmp_path / "state"),
        TERM="xterm-256color",
    )
    env.update(extra)
    return env


def test_a_crash_restores_the_terminal_and_exits_non_zero_with_one_line(tmp_path: Path) -> None:
    run = run_in_pty([sys.executable, "-c", CRASHING], dashboard_env(tmp_path))
    output = bytes(run.output)
    assert run.exit_code == 70
    assert b"\x1b[?1049h" in output and output.rfind(b"\x1b[?1049l") > output.rfind(b"\x1b[?1049h")
    after = output[output.rfind(b"\x1b[?1049l") :].decode(errors="replace")
    assert "Traceback" not in output.decode(errors="replace")
    assert (
        "gputop: the dashboard stopped on an error: KeyError: 'a bug in a widget'. This is a "
        "bug in gputop; run again with GPUTOP_DEBUG=1 to see where, and please report it."
    ) in after.replace("\r\n", "\n")


def test_without_a_terminal_the_dashboard_refuses_and_names_snapshot(tmp_path: Path) -> None:
    done = subprocess.run(
        GPUTOP,
        env=dashboard_env(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "gputop: The dashboard needs a terminal, and its input is not one: for text use "
        "gputop snapshot (or --watch to repeat it), for scripts gputop snapshot --json.\n"
    )


def test_with_term_dumb_the_dashboard_refuses_and_names_snapshot(tmp_path: Path) -> None:
    run = run_in_pty(GPUTOP, dashboard_env(tmp_path, TERM="dumb"))
    assert run.exit_code == 2
    assert b"\x1b" not in run.output
    assert bytes(run.output).decode() == (
        "gputop: The dashboard needs a terminal that understands escape codes, and TERM is "
        "'dumb': for one screen of text use gputop snapshot (or --watch to repeat it).\r\n"
    )
