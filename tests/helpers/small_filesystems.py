"""Real small file systems for the fault tests (docs/faults.md): a tmpfs the test mounts,
which real jobs fill, and a read-only bind mount of a directory.

Mounting needs root (CI runs as root). Elsewhere the tests skip with the reason; where
``GPUTOP_REQUIRE_REAL`` is set they fail instead (real_components.py). Every mount is
undone in the fixture's teardown, after every job started in it has been killed, even when
the test failed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from helpers.jobs import kill_everything_in
from helpers.real_components import cannot

SMALL_FS_BYTES = 4 * 1024 * 1024
FILLER = "filler"


def _mount(*argv: str) -> None:
    if os.geteuid() != 0:
        cannot("mounting a small file system needs root")
    result = subprocess.run(["mount", *argv], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        cannot(f"mount {' '.join(argv)} was refused: {result.stderr.strip()}")


def _kill_holders(mount_point: Path) -> None:
    """SIGKILL what still holds a file on the test's own file system: only the test's
    supervisors and jobs write there (kill_everything_in misses them when the store
    could not be read)."""
    inside = f"{mount_point}/"
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            paths = [opened.path for opened in process.open_files()]
        except psutil.Error:
            continue
        if any(path.startswith(inside) for path in paths):
            with contextlib.suppress(psutil.Error):
                process.kill()


def _unmount(path: Path) -> None:
    for _ in range(50):
        result = subprocess.run(["umount", str(path)], capture_output=True, check=False)
        if result.returncode == 0:
            return
        time.sleep(0.1)  # a process of the test is still closing a file there
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def small_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state directory on its own 4 MiB tmpfs; the test's environment points at it.

    The log floor is off, so that a job really fills the disk (a test of the floor sets
    its own)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    _mount("-t", "tmpfs", "-o", f"size={SMALL_FS_BYTES},mode=0700", "tmpfs", str(mount_point))
    directory = mount_point / "state"
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(directory))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "30")
    monkeypatch.setenv("GPUTOP_WAIT_POLL_S", "0.2")
    monkeypatch.setenv("GPUTOP_LOG_FLOOR", "0")  # jobs fill the disk (logs.py's floor off)
    for name in ("GPUTOP_FAKE", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TMUX"):
        monkeypatch.delenv(name, raising=False)
    try:
        yield directory
    finally:
        try:
            with contextlib.suppress(OSError):
                os.unlink(mount_point / FILLER)  # room for the cleanup to read the store
            kill_everything_in(directory)
        finally:
            _kill_holders(mount_point)
            _unmount(mount_point)


def read_only_view(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(source, view): ``view`` shows ``source`` through a read-only bind mount."""
    source, view = tmp_path / "source", tmp_path / "view"
    source.mkdir(mode=0o700)
    view.mkdir(mode=0o700)
    _mount("--bind", str(source), str(view))
    try:
        result = subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(view)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            cannot(f"a read-only bind mount was refused: {result.stderr.strip()}")
        yield source, view
    finally:
        _unmount(view)


def free_bytes(path: Path) -> int:
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize


def fill(directory: Path) -> Path:
    """Fill the file system holding ``directory`` to the last block; the filler's path."""
    filler = directory / FILLER
    chunk = b"\0" * 65536
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            try:
                os.write(fd, chunk[: max(free_bytes(directory), 1)])
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                return filler
    finally:
        os.close(fd)
