"""Acting on a server's gputop jobs from the lab dashboard: the ssh command lines.

Each action runs ``gputop ...`` on the host through the same ``ssh`` as its link (the
user's config, ``BatchMode``), built by :func:`remote_gputop_command`, so every word is
quoted once for the remote shell and nothing in a command, name or path is interpreted
twice. The remote gputop does every check itself (ownership, identity of the process):
the dashboard only asks. See docs/lab.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO

from gputop.core.numbers import DECODE_ERRORS, MAX_ID, outside_json, whole_within
from gputop.core.process_control import signal_group
from gputop.core.records import frozen
from gputop.core.remote.remote_command import remote_gputop_command
from gputop.core.remote.transport import ssh_argv
from gputop.core.safe_text import clean

ACTION_TIMEOUT_S = 60.0
MAX_ANSWER_BYTES = 1024 * 1024
"""What is kept of a remote action's stdout and of its stderr, each (``run --json``'s answer
is a few KB); the rest is read and dropped. Held whole, a host's endless answer grew the
dashboard without bound (and 100 MB took 86 s to clean)."""
MAX_SAID_CHARS = 500
"""Each of the last lines said to a person is cut here."""


def run_argv(
    host: str,
    uuids: Sequence[str],
    command_text: str,
    *,
    cwd: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """``gputop run --gpus UUIDS --json [--cwd DIR] -- 'TYPED COMMAND'`` on ``host``.

    The typed command goes as one argument: the remote gputop plans it exactly as the
    launch dialog's preview does here (one word that is a command line is read like typed
    text; gputop/core/jobs/command.py)."""
    remote = ["gputop", "run", "--gpus", ",".join(uuids), "--json"]
    if cwd:
        remote += ["--cwd", cwd]
    remote += ["--", command_text]
    return ssh_argv(host, remote_gputop_command(remote), environ)


def gputop_argv(
    host: str | None, args: list[str], environ: Mapping[str, str] | None = None
) -> list[str]:
    """``gputop ARGS`` on ``host`` over ssh, or on this machine (``host`` None: the lab's
    ``local``) as this very gputop, with no shell in between."""
    if host is None:
        return [sys.executable, "-m", "gputop", *args]
    return ssh_argv(host, remote_gputop_command(["gputop", *args]), environ)


def stop_argv(host: str | None, job_id: int, environ: Mapping[str, str] | None = None) -> list[str]:
    return gputop_argv(host, ["jobs", "stop", str(job_id), "--yes"], environ)


def log_argv(host: str | None, job_id: int, environ: Mapping[str, str] | None = None) -> list[str]:
    return gputop_argv(host, ["jobs", "log", str(job_id), "--follow", "--raw"], environ)


def signal_argv(
    host: str,
    pid: int,
    start_time: float | None,
    signal_name: str,
    environ: Mapping[str, str] | None = None,
    start_ticks: int | None = None,
    boot_id: str | None = None,
) -> list[str]:
    """``gputop signal`` on ``host``; with the start ticks and boot id its snapshot carried
    (a host whose gputop has ``--start-ticks``), proven by them whatever the host's clock
    did since; without them (an older host), by the start time alone."""
    remote = ["gputop", "signal", str(pid), "--signal", signal_name, "--yes"]
    if start_time is not None:
        remote += ["--start-time", repr(start_time)]
    if start_ticks is not None and boot_id is not None:
        remote += ["--start-ticks", str(start_ticks), "--boot-id", boot_id]
    return ssh_argv(host, remote_gputop_command(remote), environ)


@frozen(slots=False)
class RemoteResult:
    ok: bool
    stdout: str
    message: str
    """What to tell a person: the remote gputop's words, cleaned, or why nothing ran."""


def start_remote(argv: list[str], environ: Mapping[str, str] | None) -> subprocess.Popen[bytes]:
    """A remote action's process, its output piped, without a terminal: ssh never prompts."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=None if environ is None else dict(environ),
    )


def run_remote(argv: list[str], environ: Mapping[str, str] | None = None) -> RemoteResult:
    """Run one remote action to its end; the server's words come back cleaned."""
    try:
        answer = run_bounded(argv, environ)
    except OSError as error:
        return RemoteResult(False, "", f"cannot run ssh ({error})")
    if answer is None:
        return RemoteResult(False, "", f"no answer within {ACTION_TIMEOUT_S:g} s")
    returncode, stdout, stderr = answer
    lines = [_said(line) for line in (stdout + "\n" + stderr).splitlines() if line.strip()]
    if returncode == 255:
        lines = [_said(line) for line in stderr.splitlines() if line.strip()] or ["ssh failed"]
    return RemoteResult(returncode == 0, stdout, "\n".join(lines[-6:]))


def run_bounded(
    argv: list[str], environ: Mapping[str, str] | None = None, timeout_s: float | None = None
) -> tuple[int, str, str] | None:
    """(exit status, stdout, stderr) of one remote action, each its first
    ``MAX_ANSWER_BYTES`` decoded; None where it ran past ``timeout_s`` (default
    ``ACTION_TIMEOUT_S``) and was killed. ``OSError`` where ssh cannot be run."""
    process = start_remote(argv, environ)
    kept: dict[str, bytes] = {}
    readers = [
        threading.Thread(target=_keep_head, args=(stream, kept, name), daemon=True)
        for name, stream in (("stdout", process.stdout), ("stderr", process.stderr))
    ]
    for reader in readers:
        reader.start()
    try:
        returncode = process.wait(ACTION_TIMEOUT_S if timeout_s is None else timeout_s)
    except subprocess.TimeoutExpired:
        # its own session, which its unreaped leader keeps: ssh and what it started
        signal_group(process.pid, signal.SIGKILL)
        process.wait()
        return None
    finally:
        for reader in readers:
            reader.join(5.0)
    stdout, stderr = (
        kept.get(name, b"").decode("utf-8", "replace") for name in ("stdout", "stderr")
    )
    return returncode, stdout, stderr


def _keep_head(stream: IO[bytes] | None, kept: dict[str, bytes], name: str) -> None:
    """Read ``stream`` to its end, keeping its first ``MAX_ANSWER_BYTES``."""
    if stream is None:
        return
    head = bytearray()
    with stream:
        while chunk := os.read(stream.fileno(), 65536):
            if len(head) < MAX_ANSWER_BYTES:
                head += chunk[: MAX_ANSWER_BYTES - len(head)]
    kept[name] = bytes(head)


def _said(line: str) -> str:
    """One line of the server's words for a person: cleaned, at most ``MAX_SAID_CHARS``."""
    text = clean(line)
    return text if len(text) <= MAX_SAID_CHARS else text[: MAX_SAID_CHARS - 1] + "…"


MAX_LAUNCHED_GPUS = 1024
"""More cards than any host has: an answer listing more is no job gputop launched."""


def launch_answer(host: str, result: RemoteResult) -> str:
    """What a person is told of a launch a host answered (``gputop run --json`` there): the
    job's id and cards where the answer is one gputop wrote (an id of 1..2**63-1, at most
    ``MAX_LAUNCHED_GPUS`` card indices), else the host's own words, already cleaned and cut."""
    try:
        job = outside_json(result.stdout)
        number, gpus = job["id"], job.get("gpus", [])
    except (*DECODE_ERRORS, KeyError, AttributeError):
        job = None
    if (
        job is None
        or not whole_within(number, 1, MAX_ID)
        or not isinstance(gpus, list)
        or len(gpus) > MAX_LAUNCHED_GPUS
        or not all(whole_within(i, 0, MAX_LAUNCHED_GPUS) for i in gpus)
    ):
        return f"Launched on {clean(host)}: {result.message}"
    return f"Job {number} launched on {clean(host)}, GPU " + ",".join(map(str, gpus))
