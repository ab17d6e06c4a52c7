"""Live stand-ins for a scenario's GPU processes, so the bench reads real /proc entries.

A simulated GPU process whose pid does not exist costs the dashboard nothing on the host;
on a real server every listed process exists and psutil reads it every second. So for each
process of the scenario one real, idle process is started, with the scenario's command line
as its own (``/proc/PID/cmdline`` is exactly ``cmd``), and a copy of the scenario is written
whose pids are theirs.

How a stand-in gets the scenario's command line: it is the Python interpreter started with
``argv = cmd`` (``argv[0]`` too), and a ``sitecustomize`` module on its ``PYTHONPATH`` that
runs before Python looks at the arguments: it reports ready, then blocks reading its stdin,
a pipe only the bench holds. When the bench goes, for whatever reason, the pipe closes and
every stand-in exits; the bench also kills their process group on the way out.

Run as root, the scenario's users become a few system accounts (its first user: root), so
the table shows several users and only a few own processes, as on a shared server.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

READY_FD_ENV = "GPUTOP_BENCH_READY_FD"

SITECUSTOMIZE = f"""\
import os, sys
_fd = int(os.environ.pop("{READY_FD_ENV}"))
os.write(_fd, b".")
os.close(_fd)
sys.stdin.buffer.read()
os._exit(0)
"""

SYSTEM_ACCOUNTS = ("daemon", "bin", "sys", "nobody", "games", "man", "lp", "mail")
"""Accounts that exist on most Linux systems, for the scenario's other users when root."""


def scenario_processes(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """Every process entry of a scenario, MIG instances' included."""
    found: list[dict[str, Any]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pid"), int) and "type" in node:
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(scenario)
    return found


SYSTEM_PYTHON = Path("/usr/bin/python3")
"""The stand-ins' interpreter where it exists: one every account may run (they import
nothing of gputop); this Python otherwise, and then no other accounts."""


def _interpreter() -> str:
    return str(SYSTEM_PYTHON) if SYSTEM_PYTHON.exists() else sys.executable


def _accounts(users: list[str], interpreter: str) -> dict[str, str | None]:
    """The account each scenario user's stand-ins run as; ``None``: this process's own."""
    if os.geteuid() != 0 or interpreter != str(SYSTEM_PYTHON):
        return dict.fromkeys(users)
    available = [name for name in SYSTEM_ACCOUNTS if _exists(name)]
    mapping: dict[str, str | None] = {}
    for i, user in enumerate(users):
        mapping[user] = None if i == 0 or not available else available[(i - 1) % len(available)]
    return mapping


def _exists(account: str) -> bool:
    try:
        pwd.getpwnam(account)
    except KeyError:
        return False
    return True


@contextlib.contextmanager
def live_scenario(
    scenario_path: Path, transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> Iterator[tuple[Path, int]]:
    """A copy of the scenario (made by ``transform`` where given, e.g.
    ``busy_scenario.busy``) whose processes are live stand-ins: (its path, how many).

    Every stand-in is gone when this exits, however it exits.
    """
    scenario = json.loads(scenario_path.read_text())
    if transform is not None:
        scenario = transform(scenario)
    processes = scenario_processes(scenario)
    work = Path(tempfile.mkdtemp(prefix="gputop-bench-"))
    code = work / "code"
    code.mkdir()
    (code / "sitecustomize.py").write_text(SITECUSTOMIZE)
    for path in (work, code, code / "sitecustomize.py"):
        path.chmod(0o755)  # readable by the system accounts the stand-ins may run as
    stdin_read, stdin_write = os.pipe()
    ready_read, ready_write = os.pipe()
    children: list[subprocess.Popen[bytes]] = []
    group = 0
    interpreter = _interpreter()
    users = list(dict.fromkeys(str(p.get("user") or "") for p in processes))
    accounts = _accounts(users, interpreter)
    previous_handlers = _exit_on_signals()
    try:
        env = dict(os.environ, PYTHONPATH=str(code), **{READY_FD_ENV: str(ready_write)})
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        pids: dict[int, int] = {}
        for process in processes:
            if process["pid"] in pids:
                continue
            command = [str(part) for part in process.get("cmd") or ["python"]]
            child = subprocess.Popen(
                command,
                executable=interpreter,
                stdin=stdin_read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(ready_write,),
                cwd=work,
                env={**env, **_own_environment(process)},
                user=accounts.get(str(process.get("user") or "")),
                **_join_group(group),
            )
            group = group or child.pid
            children.append(child)
            pids[process["pid"]] = child.pid
        os.close(ready_write)
        ready_write = -1
        _wait_ready(ready_read, len(children), children)
        for process in processes:
            process["pid"] = pids[process["pid"]]
        live = work / f"{scenario_path.stem}-live.json"
        live.write_text(json.dumps(scenario))
        yield live, len(children)
    finally:
        os.close(stdin_write)  # EOF: every stand-in leaves by itself
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for child in children:
            child.wait()
        for fd in (stdin_read, ready_read, ready_write):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(work, ignore_errors=True)
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)


def _own_environment(process: dict[str, Any]) -> dict[str, str]:
    """The scenario's ``env`` of a process (its CUDA and rank variables): a stand-in is
    started with them, so ``/proc/PID/environ`` holds them as a real job's does."""
    env = process.get("env")
    if not isinstance(env, dict):
        return {}
    return {str(name): str(value) for name, value in env.items()}


def _join_group(group: int) -> dict[str, Any]:
    """Popen arguments that put the child in process group ``group`` (0: a new one)."""
    if sys.version_info >= (3, 11):
        return {"process_group": group}
    return {"preexec_fn": lambda: os.setpgid(0, group)}  # pragma: no cover (Python 3.10)


def _wait_ready(ready_read: int, count: int, children: list[subprocess.Popen[bytes]]) -> None:
    """Until every stand-in has said it is ready (it is blocked on its stdin)."""
    got = 0
    while got < count:
        data = os.read(ready_read, count - got)
        if not data:
            failed = [child.args for child in children if child.poll() is not None]
            raise SystemExit(f"only {got} of {count} stand-ins started; failed: {failed[:3]}")
        got += len(data)


def _exit_on_signals() -> dict[int, Any]:
    """SIGTERM and SIGHUP end the bench as ctrl+c does, so the stand-ins are cleaned up."""

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous[signum] = signal.signal(signum, leave)
    return previous
