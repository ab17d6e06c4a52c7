"""NVML's host pids inside a nested PID namespace: a local match must hold /dev/nvidia* open.

The end-to-end test starts a real nested PID namespace (``unshare``, as root) with a private
tmpfs over /dev holding a file named /dev/nvidia0, and runs gputop's own backend there
(tests/helpers/pid_namespace_scenario.py). The unit tests read a /proc tree built in a temporary
folder, which is how the module reads the real one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import HELPERS, REPO

from gputop.core.sampling.pid_namespace import (
    NO_DEVICE_HINT,
    UNREADABLE_HINT,
    LocalPidGuard,
    detect_pid_namespace,
    holds_nvidia_device,
)

SCRIPT = HELPERS / "pid_namespace_scenario.py"


def fake_proc(tmp_path: Path, pid: int, *targets: str) -> str:
    """A /proc with ``pid``'s descriptors linking to ``targets``."""
    fd = tmp_path / "proc" / str(pid) / "fd"
    fd.mkdir(parents=True)
    for number, target in enumerate(targets):
        (fd / str(number)).symlink_to(target)
    return str(tmp_path / "proc")


def test_a_descriptor_on_a_nvidia_device_is_found(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 42, "/dev/pts/0", "socket:[1234]", "/dev/nvidiactl")
    assert holds_nvidia_device(42, proc) is True


def test_no_nvidia_descriptor_means_no(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 42, "/dev/pts/0", "/home/alice/nvidia-notes.txt")
    assert holds_nvidia_device(42, proc) is False


def test_a_process_that_ended_holds_nothing(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 42)
    assert holds_nvidia_device(43, proc) is False


def test_nspid_with_two_pids_means_nested(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "status").write_text("Name:\tpython\nNSpid:\t51234\t7\n")
    assert detect_pid_namespace(str(tmp_path)).nested


def test_the_guard_refuses_a_local_pid_without_the_device(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 42, "/dev/pts/0")
    assert LocalPidGuard(proc=proc).refusals({42: 100.0}) == {42: NO_DEVICE_HINT}


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_refused_pid_is_looked_at_again_after_a_while(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 42, "/dev/pts/0")
    clock = Clock()
    guard = LocalPidGuard(proc=proc, recheck_after_s=10.0, clock=clock)
    assert 42 in guard.refusals({42: 100.0})
    (tmp_path / "proc" / "42" / "fd" / "9").symlink_to("/dev/nvidia0")
    clock.now = 5.0
    assert 42 in guard.refusals({42: 100.0})
    clock.now = 11.0
    assert guard.refusals({42: 100.0}) == {}


def unshare_or_skip() -> list[str]:
    if sys.platform != "linux" or shutil.which("unshare") is None:
        pytest.skip("needs Linux with unshare(1)")
    if os.geteuid() != 0:
        pytest.skip("creating a PID and mount namespace with a tmpfs over /dev needs root")
    probe = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "--mount", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"unshare cannot create namespaces here: {probe.stderr.strip()}")
    return ["unshare", "--pid", "--fork", "--mount-proc", "--mount", "--propagation", "private"]


def _nobody_python() -> dict[str, str]:
    """An interpreter and import path uid 65534 can use, for the unprivileged reader."""
    from helpers.other_user import other_user_python

    found = other_user_python() if os.geteuid() == 0 else None
    return {} if found is None else {"NOBODY_PYTHON": found[0], "NOBODY_PYTHONPATH": found[1]}


@pytest.fixture(scope="module")
def nested_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    unshare = unshare_or_skip()
    workdir = tmp_path_factory.mktemp("pidns")
    workdir.chmod(0o755)
    # The command is fixed text; the paths go in as positional arguments, never into it.
    inner = 'mount -t tmpfs gputop-test /dev && touch /dev/nvidia0 && exec "$1" "$2" "$3"'
    done = subprocess.run(
        [*unshare, "sh", "-c", inner, "sh", sys.executable, str(SCRIPT), str(workdir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **_nobody_python()},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_gputop_sees_that_it_runs_in_a_nested_pid_namespace(
    nested_run: dict[str, object],
) -> None:
    assert nested_run["nested"] is True


def test_a_local_process_holding_a_nvidia_device_is_accepted(
    nested_run: dict[str, object],
) -> None:
    seen = nested_run["seen"][str(nested_run["holder"])]  # type: ignore[index]
    assert seen["origin"] == "host"
    assert seen["user"] == "root"  # the real local process's user, not the scenario's


def test_a_colliding_local_process_without_the_device_is_foreign(
    nested_run: dict[str, object],
) -> None:
    seen = nested_run["seen"][str(nested_run["idle"])]  # type: ignore[index]
    assert seen == {"origin": "foreign", "hint": NO_DEVICE_HINT, "user": None}


def test_a_process_whose_files_cannot_be_read_is_not_trusted(
    nested_run: dict[str, object],
) -> None:
    if nested_run["nobody"] is None:
        pytest.skip(
            "setpriv(1), and a Python that uid 65534 may run, are needed to ask as an "
            "unprivileged user"
        )
    assert json.loads(str(nested_run["nobody"])) == {str(nested_run["holder"]): UNREADABLE_HINT}
