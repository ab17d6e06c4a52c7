"""A second, real user for the multi-user tests: ``nobody`` (uid 65534), run in a subprocess.

The tests run as root; the other user's side (planting a directory, a database, a link in
a shared sticky directory like /tmp) and a victim without root's powers (for whom a mode
really denies access) are real processes with that uid, started with
``subprocess.run(..., user=, group=)``. gputop itself runs there from this worktree, on an
interpreter that user can execute.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

OTHER_UID = 65534
OTHER_GID = 65534
REPO = Path(__file__).resolve().parents[2]


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to run a second user's processes with another uid")


def as_other_user(
    argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``argv`` as uid/gid 65534 in /, output captured as text."""
    require_root()
    return subprocess.run(
        argv,
        user=OTHER_UID,
        group=OTHER_GID,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@functools.lru_cache(maxsize=1)
def _readable_copy() -> str:
    """gputop, psutil and pynvml copied where any user may read them, for a checkout the other user
    cannot reach (a private clone: CI's, or one under a 0700 home). Removed at exit."""
    directory = Path(tempfile.mkdtemp(prefix="gputop-other-user-", dir="/tmp"))
    os.chmod(directory, 0o755)
    atexit.register(shutil.rmtree, directory, True)
    shutil.copytree(REPO / "gputop", directory / "gputop")
    import psutil
    import pynvml

    shutil.copytree(Path(psutil.__file__).parent, directory / "psutil")
    shutil.copy(pynvml.__file__, directory / "pynvml.py")
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return str(directory)


@functools.lru_cache(maxsize=1)
def other_user_python() -> tuple[str, str] | None:
    """(interpreter, PYTHONPATH) with which the other user can import gputop, or None."""
    site = sysconfig.get_paths()["purelib"]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    pythons = [sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}"]
    for path in (f"{REPO}:{site}", None):
        for python in pythons:
            if not os.path.exists(python):
                continue
            path = path or _readable_copy()
            try:
                check = as_other_user(
                    [python, "-c", "import gputop.cli.main, psutil"], {"PYTHONPATH": path}
                )
            except OSError:  # not executable by that user (under root's home, say)
                continue
            if check.returncode == 0:
                return python, path
    return None


def gputop_as_other_user(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python -m gputop ARGS`` as the other user."""
    found = other_user_python()
    if found is None:
        pytest.skip(f"no Python {sys.version_info[:2]} that uid {OTHER_UID} may execute")
    python, path = found
    return as_other_user([python, "-m", "gputop", *args], {"PYTHONPATH": path, **env})


def shared_dir() -> Iterator[Path]:
    """A world-writable sticky directory, like /tmp, that both users can reach."""
    require_root()
    directory = Path(tempfile.mkdtemp(prefix="gputop-shared-", dir="/tmp"))
    os.chmod(directory, 0o1777)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def other_users_dir(shared_dir: Path) -> Path:
    """A directory of the other user's, where it can run gputop with a store of its own."""
    home = shared_dir / "nobody-home"
    made = as_other_user(["mkdir", "-m", "700", str(home)])
    assert made.returncode == 0, made.stderr
    return home
