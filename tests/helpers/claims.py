"""Two real users and a shared claims directory, for the claims tests (docs/claims.md).

The users are made with ``useradd`` (the tests run as root) once per session, with names no
other worker uses, and removed at the end; gputop runs as each of them in a subprocess.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop.core.claims.book import ClaimBook
from helpers.other_user import other_user_python, require_root


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int


def _useradd(name: str) -> User:
    argv = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name]
    deadline = time.monotonic() + 30
    while True:  # another worker may hold /etc/passwd's lock for a moment
        made = subprocess.run(argv, capture_output=True, text=True, check=False)
        if made.returncode == 0 or time.monotonic() > deadline:
            break
        if "lock" not in made.stderr:
            break
        time.sleep(0.2)
    if made.returncode != 0:
        pytest.fail(f"useradd {name} failed: {made.stderr.strip()}")
    entry = pwd.getpwnam(name)
    return User(name, entry.pw_uid, entry.pw_gid)


def two_users() -> Iterator[tuple[User, User]]:
    """Two fresh users, ``ana…`` and ``bob…``, with a suffix unique to this session."""
    require_root()
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    suffix = secrets.token_hex(3)
    made = []
    try:
        made.append(_useradd(f"ana{suffix}"))
        made.append(_useradd(f"bob{suffix}"))
        yield made[0], made[1]
    finally:
        for user in made:
            subprocess.run(["userdel", user.name], capture_output=True, check=False)


def claims_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A claims directory as ``gputop claims --setup`` makes it (root's, 1777), under a
    root-owned 0755 directory every user can reach; GPUTOP_CLAIMS_DIR names it."""
    require_root()
    base = Path(tempfile.mkdtemp(prefix="gputop-claims-", dir="/tmp"))
    os.chmod(base, 0o755)
    directory = base / "claims"
    directory.mkdir()
    os.chmod(directory, 0o1777)
    monkeypatch.setenv("GPUTOP_CLAIMS_DIR", str(directory))
    try:
        yield directory
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_user(
    user: User, argv: list[str], env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        user=user.uid,
        group=user.gid,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "TZ": "UTC", **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def python_for_users() -> tuple[str, str]:
    found = other_user_python()
    if found is None:
        pytest.skip("no Python that another user may execute")
    return found


def gputop_as(
    user: User, claims: Path, *args: str, fake: str = "v100x4", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``gputop --fake FAKE ARGS`` as ``user``, with ``claims`` as the claims directory and a
    state directory of its own."""
    python, path = python_for_users()
    base = next(parent for parent in claims.parents if parent.exists())
    state = base / f"state-{user.name}"
    if not state.exists():
        state.mkdir(mode=0o700)
        os.chown(state, user.uid, user.gid)
    environ = {
        "PYTHONPATH": path,
        "GPUTOP_CLAIMS_DIR": str(claims),
        "GPUTOP_STATE_DIR": str(state),
        "GPUTOP_FAKE_TIME": "30",
        **(env or {}),
    }
    return as_user(user, [python, "-m", "gputop", "--fake", fake, *args], environ)


def ended_job(user: User, claims: Path, timeout_s: float = 60.0) -> dict:
    """``user``'s one job once it has ended, as ``gputop jobs --json`` lists it: its claim was
    given back before its end was recorded (the supervisor's order), so a test that waits here
    never sees the moment before the job took its claim."""
    import json

    from helpers.waiting import wait_for

    def ended() -> dict | None:
        (job,) = json.loads(gputop_as(user, claims, "jobs", "--json").stdout)
        return None if job["status"] in ("running", "waiting") else job

    return wait_for(ended, f"{user.name}'s job to end", timeout_s=timeout_s, poll_s=0.2)


# -- writing claim files by hand, as gputop never would (the hostile tests) --------------

WRITE = (
    "import os, sys\n"
    "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)\n"
    "os.write(fd, bytes.fromhex(sys.argv[2]))\n"
    "os.close(fd)\n"
)


def book_of(directory: Path) -> ClaimBook:
    """The claims book of ``directory``."""
    book = ClaimBook.open({"GPUTOP_CLAIMS_DIR": str(directory)})
    assert book is not None
    return book


def uuids(scenario: str = "v100x4") -> list[str]:
    """The cards' UUIDs of a built-in scenario (v100x4's unless told)."""
    from gputop.core.sampling.source import open_backend

    backend = open_backend(scenario)
    try:
        return [gpu.uuid or "" for gpu in backend.sample().gpus]
    finally:
        backend.close()


def plant(user: User, directory: Path, name: str, data: bytes) -> None:
    """``user`` writes ``data`` into ``directory/name`` by hand, as gputop never would."""
    python, _ = python_for_users()
    wrote = as_user(user, [python, "-c", WRITE, str(directory / name), data.hex()], {})
    assert wrote.returncode == 0, wrote.stderr


def claim_name(uuid: str, user: User, nonce: int) -> str:
    """A claim file's name as gputop makes it."""
    return f"{uuid}.{user.uid}.c{nonce:016x}.claim"


def holders(directory: Path) -> list[tuple[int, str]]:
    """Each held card's index and its holder."""
    with book_of(directory) as book:
        return sorted((c.gpu, c.user) for c in book.scan().holders().values())


def no_crash(done: subprocess.CompletedProcess) -> None:
    """The command ended on its own terms: no traceback, no internal error."""
    assert done.returncode != 70, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
