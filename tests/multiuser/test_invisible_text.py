"""Invisible characters from another user reach no terminal as they are (docs/security.md,
Guarantee 1): the word joiner U+2060, the soft hyphen U+00AD, U+180E, the Hangul filler
U+3164 and the tag characters U+E0000-U+E007F, which can spell a hidden text after a
visible one. Through the real paths: a claim note a second real user writes (``gputop
claim``, and by hand), shown by ``gputop claims`` and the dashboard's card; a real process
of a second user whose command line holds them, shown by ``gputop snapshot`` and the
dashboard on a real pty."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.claims import User, as_user, gputop_as, python_for_users
from helpers.dashboard import first_sample
from helpers.pty_run import GPUTOP, run_in_pty
from helpers.scenarios import minimal_gpu

from gputop.core.claims.files import content
from gputop.core.claims.view import card_claim_text
from gputop.tui.screenshots import build_app

GPU1 = "GPU-96870f72-ff47-4de2-1bb0-99f7d8338c12"  # v100x4's GPU 1
HIDDEN = "\U000e0068\U000e0069"  # "hi" in tag characters
NOTE = f"paper\u2060deadline\u00ad\u180e\u3164{HIDDEN}"
SHOWN = "paper\\u2060deadline\\xad\\u180e\\u3164\\U000e0068\\U000e0069"
INVISIBLE = {"\u2060", "\u00ad", "\u180e", "\u3164", *HIDDEN}
WRITE = (
    "import os, sys\n"
    "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)\n"
    "os.write(fd, bytes.fromhex(sys.argv[2]))\n"
    "os.close(fd)\n"
)


def invisible_in(text: str) -> list[str]:
    return sorted({hex(ord(char)) for char in text if char in INVISIBLE})


async def test_a_second_users_claim_note_shows_its_invisible_characters(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    ana, bob = two_users
    made = gputop_as(bob, claims_dir, "claim", "--gpus", "1", "--note", NOTE)
    assert made.returncode == 0, made.stderr
    listed = gputop_as(ana, claims_dir, "claims")
    assert listed.returncode == 0, listed.stderr
    assert invisible_in(listed.stdout + listed.stderr) == []
    (line,) = [row for row in listed.stdout.splitlines() if bob.name in row]
    assert SHOWN in line, line
    snapshot = gputop_as(ana, claims_dir, "snapshot")
    assert invisible_in(snapshot.stdout) == [] and SHOWN in snapshot.stdout

    app = build_app("v100x4")  # root's dashboard, on the same claims directory
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        (gpu,) = [gpu for gpu in app.snapshot.gpus if gpu.physical_index == 1]
        said = card_claim_text(gpu, time.time())
    assert said is not None and invisible_in(said) == []
    assert said.endswith(SHOWN), said


def test_a_claim_note_written_by_hand_never_reaches_a_terminal_as_it_is(
    two_users: tuple[User, User], claims_dir: Path
) -> None:
    """gputop writes a note cleaned; bob writes the file himself, with the characters raw."""
    ana, bob = two_users
    data = content(GPU1, 1, bob.uid, bob.name, time.time() + 3600, NOTE, None)
    assert b"\\u2060" in data  # JSON's own escape: the file is plain ASCII
    python, _ = python_for_users()
    name = f"{GPU1}.{bob.uid}.c{7:016x}.claim"
    wrote = as_user(bob, [python, "-c", WRITE, str(claims_dir / name), data.hex()], {})
    assert wrote.returncode == 0, wrote.stderr
    for shown in (gputop_as(ana, claims_dir, "claims"), gputop_as(ana, claims_dir, "snapshot")):
        assert shown.returncode == 0, shown.stderr
        assert invisible_in(shown.stdout + shown.stderr) == []
    as_root = subprocess.run(
        [*GPUTOP, "--fake", "v100x4", "claims"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert as_root.returncode == 0, as_root.stderr
    assert invisible_in(as_root.stdout + as_root.stderr) == []
    assert bob.name in as_root.stdout  # root is told of the file, whatever it makes of it


@pytest.fixture
def invisible_process() -> Iterator[subprocess.Popen[bytes]]:
    """A waiting shell of uid 65534 whose arguments hold invisible characters."""
    as_other_user = {"user": 65534, "group": 65534} if os.geteuid() == 0 else {}
    process = subprocess.Popen(
        ["sh", "-c", "sleep 600; :", "t\u2060.py", f"--run={NOTE}"],
        executable="/bin/sh",
        cwd="/",
        start_new_session=True,
        **as_other_user,  # type: ignore[call-overload]
    )
    try:
        yield process
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _environment(tmp_path: Path, pid: int) -> dict[str, str]:
    scenario = tmp_path / "invisible.json"
    gpu = minimal_gpu(processes=[{"pid": pid, "used_memory_mib": 512, "type": "C"}])
    document = {
        "description": "a command line with invisible characters",
        "driver_version": "550.127.05",
        "cuda_driver_version": 12040,
        "gpus": [gpu],
    }
    scenario.write_text(json.dumps(document))
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("GPUTOP_DEBUG", "TMUX", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
    }
    env.update(
        GPUTOP_FAKE=str(scenario),
        GPUTOP_FAKE_TIME="30",
        GPUTOP_STATE_DIR=str(tmp_path / "state"),
        TERM="xterm-256color",
        LANG="C.UTF-8",
    )
    return env


def test_snapshot_and_the_dashboard_show_a_command_lines_invisible_characters(
    invisible_process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    env = _environment(tmp_path, invisible_process.pid)
    run = run_in_pty([*GPUTOP, "snapshot"], env, size=(240, 24))
    assert run.exit_code == 0
    assert invisible_in(bytes(run.output).decode("utf-8", "replace")) == []
    (line,) = [row for row in run.screen.display if str(invisible_process.pid) in row]
    assert f"sh -c sleep 600; : t\\u2060.py --run={SHOWN}" in line, line

    dashboard = run_in_pty(
        GPUTOP,
        env,
        size=(240, 48),
        until=lambda run: "t\\u2060.py" in run.display,
        then_type=b"q",
        what="the process's command line in the process table",
    )
    assert dashboard.exit_code == 0
    assert invisible_in(bytes(dashboard.output).decode("utf-8", "replace")) == []
