"""The job store in ordinary use, hard: nothing lost (docs/sqlite.md, docs/faults.md).

A dashboard (Pilot) launches jobs again and again while `gputop run` processes launch
theirs, `gputop jobs --json` processes read, and every job's supervisor records its start
and its end, all on the same store, with real processes. Before the store's files were
checked through ``O_PATH`` this ended within seconds in "database disk image is malformed"
and a store moved aside with every job in it (the dashboard's launches dropped its own
reader's locks). After it: the integrity check is ok, no store was moved aside, and every job
is listed with its own exit status.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers.dashboard import first_sample, make_app, plain_text
from textual.pilot import Pilot
from textual.widgets import Input, Static

from gputop.tui.app import GputopApp
from gputop.tui.screens.launch import LaunchScreen

STRESS_S = 5.0
"""How long the CLI launchers and readers run beside the dashboard (the store broke within
a few seconds before its files were checked through ``O_PATH``; at least
``DASHBOARD_LAUNCHES`` launches from the dashboard however long they take)."""
DASHBOARD_LAUNCHES = 6
CLI_LAUNCHERS = 2
READERS = 2


def _gputop(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=dict(os.environ),
    )


def _cli_launcher(worker: int, stop: threading.Event, launched: list[int], errors: list[str]):
    """`gputop run` again and again: each job exits with a code the test knows."""
    n = 0
    while not stop.is_set():
        code = 10 + (worker * 50 + n) % 100
        result = _gputop(
            "run", "--fake", "v100x4", "--gpus", str(2 + worker % 2), "--name",
            f"cli-{worker}-{n}", "--", sys.executable, "-c", f"raise SystemExit({code})",
        )  # fmt: skip
        if result.returncode != 0:
            errors.append(f"run: {result.returncode}: {result.stderr}")
        launched.append(code)
        n += 1


def _reader(stop: threading.Event, errors: list[str]) -> None:
    while not stop.is_set():
        result = _gputop("jobs", "--json")
        if result.returncode != 0 or "malformed" in result.stderr or "moved aside" in result.stderr:
            errors.append(f"jobs --json: {result.returncode}: {result.stderr}")
        else:
            json.loads(result.stdout)


async def _launch_from_dashboard(app: GputopApp, pilot: Pilot[None], n: int, cwd: Path) -> None:
    await pilot.press("l")
    deadline = time.monotonic() + 30
    while not isinstance(app.screen, LaunchScreen):
        assert time.monotonic() < deadline, "the launch dialog did not open"
        await pilot.pause(0.05)
    screen = app.screen
    screen.query_one("#cwd", Input).value = str(cwd)
    command = screen.query_one("#command", Input)
    command.value = f"{sys.executable} -c 'raise SystemExit({200 + n})'"
    command.focus()
    await pilot.press("enter")
    while isinstance(app.screen, LaunchScreen):
        if time.monotonic() > deadline:
            error = plain_text(app.screen.query_one("#launch-error", Static), width=300)
            raise AssertionError(f"the launch did not finish: {error}")
        await pilot.pause(0.05)


def _all_ended(state_dir: Path, expected: int) -> list[dict]:
    deadline = time.monotonic() + 120
    while True:
        result = _gputop("jobs", "--json")
        assert result.returncode == 0, result.stderr
        jobs = json.loads(result.stdout)
        if len(jobs) >= expected and all(job["ended_at"] is not None for job in jobs):
            return jobs
        assert time.monotonic() < deadline, f"jobs not all ended: {jobs}"
        time.sleep(0.5)


async def test_launching_from_the_dashboard_beside_cli_launches_and_readers_loses_nothing(
    private_state_dir: Path, tmp_path: Path
) -> None:
    state_dir = private_state_dir
    stop = threading.Event()
    launched: list[list[int]] = [[] for _ in range(CLI_LAUNCHERS)]
    errors: list[str] = []
    threads = [
        threading.Thread(target=_cli_launcher, args=(w, stop, launched[w], errors))
        for w in range(CLI_LAUNCHERS)
    ] + [threading.Thread(target=_reader, args=(stop, errors)) for _ in range(READERS)]
    app = make_app("v100x4", interval_s=0.2)
    dashboard_notices: list[str] = []
    real_notify = app.notify

    def notify(message: str, *args: object, **kwargs: object) -> None:
        dashboard_notices.append(str(message))
        real_notify(message, *args, **kwargs)  # type: ignore[arg-type]

    app.notify = notify  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        for thread in threads:
            thread.start()
        started = time.monotonic()
        try:
            n = 0
            while n < DASHBOARD_LAUNCHES or time.monotonic() - started < STRESS_S:
                await _launch_from_dashboard(app, pilot, n, tmp_path)
                n += 1
                await pilot.pause(0.3)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
        dashboard_launches = n
        cli_launches = sum(len(codes) for codes in launched)
        jobs = _all_ended(state_dir, dashboard_launches + cli_launches)

    assert errors == []
    assert not [text for text in dashboard_notices if "unavailable" in text or "damaged" in text]
    assert not list(state_dir.glob("*.corrupt-*"))
    connection = sqlite3.connect(f"file:{state_dir / 'jobs.sqlite3'}?mode=ro", uri=True)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        connection.close()
    assert len(jobs) == dashboard_launches + cli_launches
    from_dashboard = sorted(job["exit_code"] for job in jobs if job["exit_code"] >= 200)
    assert from_dashboard == list(range(200, 200 + dashboard_launches))
    from_cli = sorted(job["exit_code"] for job in jobs if job["exit_code"] < 200)
    assert from_cli == sorted(code for codes in launched for code in codes)
    assert dashboard_launches >= DASHBOARD_LAUNCHES and cli_launches >= CLI_LAUNCHERS
