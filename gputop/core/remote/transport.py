"""The transport is the user's own OpenSSH client, run as a subprocess.

Running ``ssh`` (not a Python SSH library) means ``~/.ssh/config``, aliases, ProxyJump,
agents, ControlMaster and Kerberos work exactly as when the user types ``ssh host``. The
dashboard must never stop to ask for anything, so ssh runs with ``BatchMode=yes`` and a pipe
for stdin; when it fails, its stderr is turned into a :class:`Failure` that says what is
wrong and what to run once to fix it. The command line is an argv list: nothing local goes
through a shell, and the remote command is quoted word by word (remote_command.py).

``settings.SSH_CONFIG`` names an ssh config file (``ssh -F``) and ``settings.SSH_OPTIONS`` adds
options (split like a shell would: ``-o ConnectTimeout=5 -J bastion``); both are for people
whose lab needs a separate config, and for the tests. See docs/lab.md.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from gputop.core import settings
from gputop.core.errors import UsageError
from gputop.core.install_advice import install_advice
from gputop.core.numbers import quoted
from gputop.core.records import frozen

SSH_CONFIG_ENV = settings.SSH_CONFIG.name
CONNECT_TIMEOUT_S = 10
# A dead network is noticed in about 15 s even while no data is due.
SERVER_ALIVE_INTERVAL_S = 5
SERVER_ALIVE_COUNT = 3

# What an ssh destination may look like: [user@]host, an alias, an IPv6 address. No
# spaces, no control characters, no leading '-' (ssh would read it as an option).
_DESTINATION = re.compile(r"^[A-Za-z0-9_.%:@\[\]+=~-]+$")


def check_destination(name: str) -> str:
    """``name`` if ssh can take it as a destination, else a UsageError saying why."""
    if not name or name.startswith("-") or not _DESTINATION.match(name):
        from gputop.core.safe_text import clean

        raise UsageError(
            f"{clean(name)!r} is not a host name or ssh alias (letters, digits, '.', '-', "
            "'_', ':', '@' and '[...]' only, not starting with '-')."
        )
    return name


def ssh_argv(
    destination: str,
    remote_command: str,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """``ssh`` with options that never prompt, the user's extra options, the destination,
    and the remote command (already quoted for the remote shell)."""
    argv = ["ssh"]
    config = settings.SSH_CONFIG.read(environ)
    if config:
        argv += ["-F", config]
    extra = settings.SSH_OPTIONS.read(environ)
    try:
        argv += shlex.split(extra)
    except ValueError as error:
        raise UsageError(
            f"{settings.SSH_OPTIONS.name}={quoted(extra)} cannot be split: {error}."
        ) from None
    argv += [
        "-T",  # no terminal: a pty would echo, translate newlines and merge stderr
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "-o",
        f"ServerAliveInterval={SERVER_ALIVE_INTERVAL_S}",
        "-o",
        f"ServerAliveCountMax={SERVER_ALIVE_COUNT}",
        "--",
        check_destination(destination),
        remote_command,
    ]
    return argv


@frozen(slots=False)
class Failure:
    """Why a host cannot be reached, in words, and the one thing to do about it."""

    kind: str
    """A stable word for scripts: host-key, host-key-changed, auth, resolve, refused,
    timeout, closed, no-ssh, no-gputop, remote-error, lost, unreadable (what the host sent
    could not be read at all: the connection is dropped and tried again with backoff), flood
    (more bytes or lines than an agent sends: dropped likewise)."""
    reason: str
    advice: str | None = None

    def describe(self) -> str:
        return self.reason if self.advice is None else f"{self.reason}; {self.advice}"


_RULES: Sequence[tuple[str, re.Pattern[str], str, str | None]] = (
    (
        "host-key-changed",
        re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed"),
        "its host key has changed (a reinstalled server, or someone in between)",
        "check with its admin, then remove the old key (ssh-keygen -R {host}) and run "
        "`ssh {host}` once",
    ),
    (
        "host-key",
        re.compile(r"Host key verification failed|No \S+ host key is known"),
        "its host key is not known yet",
        "run `ssh {host}` once to accept its key",
    ),
    (
        "auth",
        re.compile(r"Permission denied|Too many authentication failures"),
        "permission denied (ssh would need a password, and gputop never asks)",
        "set up key authentication: ssh-copy-id {host} (and ssh-add for the agent)",
    ),
    (
        "resolve",
        re.compile(r"Could not resolve hostname|Name or service not known|nodename nor"),
        "unknown host name (no DNS entry and no alias in ~/.ssh/config)",
        "check the name, or add a Host entry to ~/.ssh/config",
    ),
    (
        "refused",
        re.compile(r"Connection refused"),
        "connection refused (no sshd listening there)",
        None,
    ),
    (
        "timeout",
        re.compile(r"timed out|Timeout, server|No route to host|Network is unreachable"),
        "no answer (timed out: host down or a firewall)",
        None,
    ),
    (
        "closed",
        re.compile(r"Connection closed by|Connection reset|kex_exchange_identification"),
        "the server closed the connection",
        None,
    ),
)


def classify_failure(host: str, stderr: str, exit_code: int | None) -> Failure:
    """Turn ssh's stderr and exit status into a Failure for a person."""
    if exit_code == 255 or exit_code is None:
        for kind, pattern, reason, advice in _RULES:
            if pattern.search(stderr):
                return Failure(kind, reason, advice.format(host=host) if advice else None)
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
    if exit_code == 255:
        return Failure("closed", f"ssh failed: {last}" if last else "ssh failed")
    if exit_code == 127:
        return no_gputop(host)
    detail = f": {last}" if last else ""
    return Failure("remote-error", f"the remote command ended (exit {exit_code}){detail}")


def no_gputop(host: str) -> Failure:
    return Failure(
        "no-gputop", "neither gputop nor nvidia-smi is on the server's PATH", install_advice(host)
    )
