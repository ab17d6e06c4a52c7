"""A real process with terminal commands in its argv, shown by gputop on a real pty.

The process is started with OSC 52 (set the clipboard), OSC 0 (set the window title) and
``ESC[2J`` (clear the screen) in its ``argv[0]`` and arguments, as another user on the machine
would (as root, the test starts it as uid 65534). A scenario puts its pid on a simulated GPU;
for a live pid gputop takes user and command from the host (psutil), so what is shown is
what the kernel reports for the real process. The bytes gputop writes to the pty must not
carry those commands; ``pyte`` tells what a terminal would show.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.hostile import CLEAR, OSC0, OSC52
from helpers.jobs import asked_job
from helpers.pty_run import GPUTOP, PtyRun, run_in_pty
from helpers.scenarios import minimal_gpu

from gputop.core.jobs.store import JobStore

NOBODY = 65534


@pytest.fixture
def hostile_process() -> Iterator[subprocess.Popen[bytes]]:
    """A waiting shell whose argv[0] and arguments hold terminal commands."""
    as_other_user = {"user": NOBODY, "group": NOBODY} if os.geteuid() == 0 else {}
    process = subprocess.Popen(
        [f"{OSC0}sh", "-c", "while :; do sleep 1; done", OSC52, CLEAR, "two\nlines"],
        executable="/bin/sh",
        cwd="/",
        start_new_session=True,
        **as_other_user,  # type: ignore[call-overload]
    )
    try:
        yield process
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the shell and its sleep
        process.wait()


def scenario_with(pid: int, directory: Path) -> str:
    path = directory / "hostile.json"
    gpu = minimal_gpu(processes=[{"pid": pid, "used_memory_mib": 512, "type": "C"}])
    path.write_text(
        json.dumps(
            {
                "description": "one hostile process",
                "driver_version": "550.127.05",
                "cuda_driver_version": 12040,
                "gpus": [gpu],
            }
        )
    )
    return str(path)


def environment(tmp_path: Path, scenario: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("GPUTOP_DEBUG", "TMUX", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
    }
    env.update(
        GPUTOP_FAKE=scenario,
        GPUTOP_FAKE_TIME="30",
        GPUTOP_STATE_DIR=str(tmp_path / "state"),
        TERM="xterm-256color",
    )
    return env


def assert_terminal_untouched(run: PtyRun) -> None:
    """No clipboard write, no title from the data, no screen clear in the bytes written."""
    output = bytes(run.output)
    assert b"\x1b]52" not in output
    assert b"pwned-title\x07" not in output and b"\x1b]0;" not in output
    assert b"\x1b[2J" not in output
    assert "pwned" not in (run.screen.title or "")


def shows_the_process(run: PtyRun) -> bool:
    return "\\e]52;c;aGVsbG8gY2xpcGJvYXJk\\x07" in run.display


def test_snapshot_shows_the_hostile_process_without_obeying_it(
    hostile_process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    env = environment(tmp_path, scenario_with(hostile_process.pid, tmp_path))
    run = run_in_pty([*GPUTOP, "snapshot"], env, size=(240, 24))
    assert run.exit_code == 0
    assert b"\x1b" not in run.output  # the text output writes no escape sequence at all
    assert_terminal_untouched(run)
    (line,) = [row for row in run.screen.display if str(hostile_process.pid) in row]
    assert "\\e]0;pwned-title\\x07sh -c while :; do sleep 1; done \\e]52;c;" in line
    assert "\\e[2J two\\nlines" in line


def test_dashboard_shows_the_hostile_process_without_obeying_it(
    hostile_process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    env = environment(tmp_path, scenario_with(hostile_process.pid, tmp_path))
    run = run_in_pty(
        GPUTOP,
        env,
        size=(240, 48),
        until=lambda run: str(hostile_process.pid) in run.display and shows_the_process(run),
        then_type=b"q",
        what="the hostile process in the process table, its escapes shown as text",
    )
    assert_terminal_untouched(run)
    assert run.exit_code == 0


def test_dashboard_status_and_cards_do_not_obey_hostile_scenario_strings(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hostile.json"
    path.write_text(
        json.dumps(
            {
                "hostname": f"host{OSC0}",
                "description": f"desc {OSC52}{CLEAR}",
                "driver_version": "550.127.05",
                "cuda_driver_version": 12040,
                "gpus": [minimal_gpu(name=f"NVIDIA {OSC52}{OSC0}{CLEAR}")],
            }
        )
    )
    run = run_in_pty(
        GPUTOP,
        environment(tmp_path, str(path)),
        until=lambda run: "NVIDIA \\e]52;c;" in run.display,
        then_type=b"q",
        what="the card with the hostile GPU name",
    )
    assert_terminal_untouched(run)
    assert run.exit_code == 0


def test_jobs_list_and_log_show_hostile_text_and_keep_only_colours(tmp_path: Path) -> None:
    env = environment(tmp_path, "v100x4")
    store = JobStore.open(tmp_path / "state")
    try:
        job = store.create_job(
            asked_job(
                name=f"exp{OSC0}",
                command=["python", OSC52],
                cwd="/tmp",
                uuids=["GPU-5a9e5b38-bd6d-2f23-3b22-d42f6e26aa55"],
            )
        )
    finally:
        store.close()
    with open(job.log_path, "ab") as log:
        log.write(f"\x1b[31mred\x1b[0m {OSC52}{CLEAR}\r10%\r20%\n".encode())

    listing = run_in_pty([*GPUTOP, "jobs"], env)
    assert listing.exit_code == 0
    assert_terminal_untouched(listing)
    assert "exp\\e]0;pwned-title\\x07" in listing.display

    shown = run_in_pty([*GPUTOP, "jobs", "log", str(job.id)], env)
    assert shown.exit_code == 0
    assert_terminal_untouched(shown)
    assert b"\x1b[31mred\x1b[0m" in shown.output  # colours are kept
    assert "20%\\e]52;c;aGVsbG8gY2xpcGJvYXJk\\x07\\e[2J" in shown.display.replace(" ", "")

    raw = run_in_pty([*GPUTOP, "jobs", "log", "--raw", str(job.id)], env)
    assert raw.exit_code == 0
    assert OSC52.encode() in raw.output  # --raw: the bytes as they are, by request
