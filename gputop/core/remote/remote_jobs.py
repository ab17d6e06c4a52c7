"""Acting on a server's gputop jobs from the lab dashboard: the ssh command lines.

Each action runs ``gputop ...`` on the host through the same ``ssh`` as its link (the
user's config, ``BatchMode``), built by :func:`remote_gputop_command`, so every word is
quoted once for the remote shell and nothing in a command, name or path is interpreted
twice. The remote gputop does every check itself (ownership, identity of the process):
the dashboard only asks. See docs/lab.md.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop.core.remote.remote_command import remote_gputop_command
from gputop.core.remote.transport import ssh_argv
from gputop.core.safe_text import clean

ACTION_TIMEOUT_S = 60.0


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


@dataclass(frozen=True)
class RemoteResult:
    ok: bool
    stdout: str
    message: str
    """What to tell a person: the remote gputop's words, cleaned, or why nothing ran."""


def run_remote(argv: list[str], environ: Mapping[str, str] | None = None) -> RemoteResult:
    """Run one remote action to its end; the server's words come back cleaned."""
    try:
        result = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
            timeout=ACTION_TIMEOUT_S,
            start_new_session=True,  # no terminal: ssh can never prompt
            env=None if environ is None else dict(environ),
        )
    except OSError as error:
        return RemoteResult(False, "", f"cannot run ssh ({error})")
    except subprocess.TimeoutExpired:
        return RemoteResult(False, "", f"no answer within {ACTION_TIMEOUT_S:g} s")
    stdout = result.stdout.decode("utf-8", "replace")
    stderr = result.stderr.decode("utf-8", "replace")
    lines = [clean(line) for line in (stdout + "\n" + stderr).splitlines() if line.strip()]
    if result.returncode == 255:
        lines = [clean(line) for line in stderr.splitlines() if line.strip()] or ["ssh failed"]
    return RemoteResult(result.returncode == 0, stdout, "\n".join(lines[-6:]))
