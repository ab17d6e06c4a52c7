"""``gputop hosts install``: put this gputop's wheel on a GPU server over the user's own ssh.

One ``ssh`` per host with the lab's options (transport.py: never a prompt); the wheel
travels on its stdin, and the remote command is one POSIX ``sh -c 'SCRIPT'``, so it means
the same under any login shell: the wheel into a fresh ``mktemp -d``, installed with pipx
where present, else ``pip install --user``, then the ``gputop --version`` the lab's agent
search would find, with marker lines (``gputop-install: ...``) saying what happened. Every
word that varies goes through ``shlex.quote``. docs/lab.md, "Installing gputop on the servers".
"""

from __future__ import annotations

import re
import shlex
import subprocess
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from gputop import DISTRIBUTION
from gputop.core import settings
from gputop.core.errors import UsageError
from gputop.core.records import frozen
from gputop.core.remote.host_link import STDERR_TAIL_LINES, collect_tail, cut_lines
from gputop.core.remote.transport import classify_failure, ssh_argv

MARK = "gputop-install:"
DEFAULT_TIMEOUT_S = 600.0
# The remote script's own exit codes (the installers' codes pass through otherwise).
NO_TEMP_DIR_EXIT = 90
NO_PYTHON_EXIT = 91
# A wheel's file name as pip wants it (PEP 427), for our distribution, pure Python.
WHEEL_NAME = re.compile(
    r"^" + DISTRIBUTION.replace("-", "_") + r"-[0-9][0-9A-Za-z.+!_]*-py3-none-any\.whl$"
)
OUTPUT_LINES_KEPT = 3
MARKS_KEPT = 16
LINE_CHARS_KEPT = 500
"""Each line of a host's output is kept to this; the rest of a longer line is read and
dropped, so ssh never blocks (its stderr's lines: host_link.collect_tail)."""
EXTERNALLY_MANAGED = "externally-managed-environment"


@frozen(slots=False)
class InstallResult:
    """What happened on one host, in words for a person."""

    host: str
    """The name as the user gave it: untrusted text, cleaned before it is printed."""
    ok: bool
    method: str | None
    """``pipx`` or ``pip --user``; None where no installer ran."""
    detail: str
    """What the host's gputop says it is now, or why the install failed and what to do.
    Comes partly from the host: untrusted text."""


def wheel_name(directory_version: str) -> str:
    """The file name ``make dist`` gives this version's wheel."""
    return f"{DISTRIBUTION.replace('-', '_')}-{directory_version}-py3-none-any.whl"


def check_wheel(path: Path) -> Path:
    """``path`` if it is a readable wheel file of gputop, else a UsageError saying why."""
    if not WHEEL_NAME.match(path.name):
        raise UsageError(
            f"{str(path)!r} is not a wheel of {DISTRIBUTION} (its name should look like "
            f"{wheel_name('0.1.0')}; make one with `make dist`)."
        )
    if not path.is_file():
        raise UsageError(
            f"There is no wheel at {path}: make one with `make dist`, or give --wheel."
        )
    return path


def install_script(wheel: str, pip_args: Sequence[str]) -> str:
    """The script sshd's shell runs; the wheel's file name and the pip options are its only
    values, each quoted."""
    if not WHEEL_NAME.match(wheel):
        raise ValueError(f"{wheel!r} is not a wheel file name of {DISTRIBUTION}")
    target = '"$d"/' + shlex.quote(wheel)
    pipx_args = f" --pip-args={shlex.quote(shlex.join(pip_args))}" if pip_args else ""
    pip_words = f" {shlex.join(pip_args)}" if pip_args else ""
    parts = [
        # The same search as the agent's (remote_command.py), and where `pip install --user`
        # puts scripts when PYTHONUSERBASE moves the user's base.
        f'PATH="{settings.REMOTE_PATH_FIRST}'
        '${PYTHONUSERBASE:+$PYTHONUSERBASE/bin:}$PATH:$HOME/.local/bin"',
        "export PATH",
        f'd=$(mktemp -d) || {{ echo "{MARK} failed: cannot make a temporary directory"; '
        f"exit {NO_TEMP_DIR_EXIT}; }}",
        "trap 'rm -rf \"$d\"' EXIT",
        f'cat > {target} || {{ echo "{MARK} failed: cannot write the wheel to $d"; '
        f"exit {NO_TEMP_DIR_EXIT}; }}",
        "if command -v pipx >/dev/null 2>&1",
        f"then echo '{MARK} method pipx'",
        f"pipx install --force{pipx_args} {target} 2>&1 || exit $?",
        "elif command -v python3 >/dev/null 2>&1",
        f"then echo '{MARK} method pip --user'",
        f"python3 -m pip install --user --disable-pip-version-check{pip_words} {target} 2>&1 "
        "|| exit $?",
        f"else echo '{MARK} failed: neither pipx nor python3 is on the PATH there'",
        f"exit {NO_PYTHON_EXIT}",
        "fi",
        f'echo "{MARK} version $(gputop --version 2>&1 | tail -n 1)"',
    ]
    return "; ".join(parts)


def remote_install_command(wheel: str, pip_args: Sequence[str]) -> str:
    """What follows the host on the ssh command line: one word, quoted for the remote shell."""
    return "sh -c " + shlex.quote(install_script(wheel, pip_args))


def install_on_host(
    host: str,
    wheel: Path,
    pip_args: Sequence[str] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> InstallResult:
    """Copy ``wheel`` to ``host`` and install it there; never raises for a host's failure."""
    try:
        argv = ssh_argv(host, remote_install_command(wheel.name, pip_args))
    except UsageError as error:
        return InstallResult(host, False, None, str(error))
    output = _Output()
    stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
    try:
        with wheel.open("rb") as stdin:
            process = subprocess.Popen(
                argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
    except FileNotFoundError:
        return InstallResult(host, False, None, "ssh is not installed here (OpenSSH's client)")
    readers = [
        threading.Thread(target=output.collect, args=(process.stdout,), daemon=True),
        threading.Thread(target=collect_tail, args=(process.stderr, stderr), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        exit_code = process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return InstallResult(
            host, False, None, f"no result within {timeout_s:g} s (give more with --timeout)"
        )
    finally:
        for reader in readers:
            reader.join(5.0)
    return judge(host, exit_code, output.text(), "\n".join(stderr).encode())


class _Output:
    """What is kept of the host's output: its marker lines and its last lines, each cut to
    ``LINE_CHARS_KEPT``, and whether pip said its environment is the distribution's. A host
    can send anything: held whole, 200 MB sent were 720 MB resident, and a "version" line of
    20 MB was printed whole."""

    def __init__(self) -> None:
        self.marks: deque[str] = deque(maxlen=MARKS_KEPT)
        self.tail: deque[str] = deque(maxlen=OUTPUT_LINES_KEPT)
        self.managed = False

    def collect(self, stream: IO[bytes] | None) -> None:
        for line in cut_lines(stream, LINE_CHARS_KEPT, "\n"):
            self._keep(line)

    def _keep(self, line: str) -> None:
        if line.startswith(MARK):
            self.marks.append(line)
        elif line.strip():
            self.tail.append(line)
            self.managed = self.managed or EXTERNALLY_MANAGED in line

    def text(self) -> str:
        managed = [EXTERNALLY_MANAGED] if self.managed else []
        return "\n".join([*self.marks, *managed, *self.tail])


def judge(host: str, exit_code: int, output: str, stderr: bytes) -> InstallResult:
    """The result of one host's ssh, from its exit status, output and stderr."""
    method: str | None = None
    version: str | None = None
    failed: str | None = None
    for line in output.splitlines():
        if not line.startswith(MARK):
            continue
        word, _, rest = line[len(MARK) :].strip().partition(" ")
        if word == "method":
            method = rest.strip()
        elif word == "version":
            version = rest.strip()
        elif word == "failed:":
            failed = rest.strip()
    if exit_code == 0 and method is not None:
        found = version or "nothing"
        return InstallResult(host, True, method, f"installed with {method}; gputop there: {found}")
    if method is None and failed is None:  # the script never ran: ssh itself failed
        failure = classify_failure(host, stderr.decode("utf-8", "replace"), exit_code)
        return InstallResult(host, False, None, f"ssh failed: {failure.describe()}")
    if failed is not None:
        return InstallResult(host, False, method, failed)
    return InstallResult(host, False, method, _installer_failure(method, exit_code, output))


def _installer_failure(method: str | None, exit_code: int, output: str) -> str:
    if EXTERNALLY_MANAGED in output:
        return (
            "the host's Python is managed by its distribution (PEP 668) and there is no pipx: "
            "install pipx there (Debian, Ubuntu: apt install pipx), then run this again"
        )
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    tail = [line for line in lines if not line.startswith(MARK)][-OUTPUT_LINES_KEPT:]
    said = ": " + " / ".join(tail) if tail else ""
    return f"{method} failed (exit {exit_code}){said}"
