"""The command line the lab view asks sshd to run on each GPU server.

One POSIX ``sh`` script on one line, ``sh -c 'SCRIPT'``, so it means the same under any
login shell: ``gputop agent`` where gputop is installed, else a loop over nvidia-smi's CSV
queries (reduced.py), else a line saying there is neither. Every word that varies goes
through ``shlex.quote``. ``settings.REMOTE_PATH`` on the server is searched first and
``~/.local/bin`` (pipx, ``pip install --user``) last, since non-interactive ssh sessions
often lack it (docs/lab.md).
"""

from __future__ import annotations

import math
import shlex

from gputop.core import settings
from gputop.core.remote.reduced import (
    APP_FIELDS,
    GPU_FIELDS,
    MARK_APPS,
    MARK_END,
    MARK_GPUS,
    MARK_NOTHING,
    MARK_REDUCED,
)

SEARCH_PATH = f'PATH="{settings.REMOTE_PATH_FIRST}$PATH:$HOME/.local/bin"'
"""The agent's search: ``settings.REMOTE_PATH`` first, ``~/.local/bin`` last."""

CSV = "--format=csv,noheader,nounits"


def agent_script(interval_s: float) -> str:
    """The script sshd's shell runs; ``interval_s`` is the only value in it."""
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise ValueError(f"interval {interval_s!r} is not a positive number of seconds")
    interval = shlex.quote(f"{interval_s:g}")
    query_gpus = shlex.join(["nvidia-smi", "--query-gpu=" + ",".join(GPU_FIELDS), CSV])
    query_apps = shlex.join(["nvidia-smi", "--query-compute-apps=" + ",".join(APP_FIELDS), CSV])
    parts = [
        SEARCH_PATH,
        "export PATH",
        "if command -v gputop >/dev/null 2>&1",
        f"then exec gputop agent --interval {interval}",
        "elif command -v nvidia-smi >/dev/null 2>&1",
        f"then echo {MARK_REDUCED}",
        "while :",
        f"do echo {MARK_GPUS}",
        f"{query_gpus} || exit 1",
        f"echo {MARK_APPS}",
        f"{query_apps} 2>/dev/null",
        f"echo {MARK_END}",
        f"sleep {interval}",
        "done",
        f"else echo {MARK_NOTHING}",
        "exit 127",
        "fi",
    ]
    return "; ".join(parts)


def remote_agent_command(interval_s: float) -> str:
    """What follows the host on the ssh command line: one word, quoted for the remote shell."""
    return "sh -c " + shlex.quote(agent_script(interval_s))


def remote_gputop_command(argv: list[str]) -> str:
    """``gputop ARGS`` for the remote shell, each word quoted, with the same PATH search as
    the agent (so a pipx install in ~/.local/bin is found)."""
    script = "; ".join(
        [
            SEARCH_PATH,
            "export PATH",
            "exec " + shlex.join(argv),
        ]
    )
    return "sh -c " + shlex.quote(script)
