"""``l`` in the fleet dashboard: the lab's launch on a node's free cards, where the node is
an ssh destination; else what to run (docs/fleet.md, "The fleet dashboard").

A node's name is a label another machine exported: it is used only when it is a plain host
name (letters, digits, ``-`` and ``.``), and only as ssh's destination argument (an argv, no
shell). It is an ssh destination where the user named it for the lab: a host of hosts.toml's
groups, or a ``Host`` of the ssh config the lab's ssh reads (``settings.SSH_CONFIG``, else
``~/.ssh/config``; a lone ``*`` names no host). The launch is then the lab's own: its dialog
(RemoteLaunchScreen) on the free cards, and ``gputop run --gpus UUIDS`` on the node over ssh,
whose gputop checks the cards again itself.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.screen import Screen

from gputop.core import settings
from gputop.core.errors import GputopError
from gputop.core.fleet.model import FleetGpu, FleetNode
from gputop.core.jobs.service import JobsService
from gputop.core.model import GpuSample, Snapshot
from gputop.core.private_files import read_regular_file
from gputop.core.remote.hosts import config_path, load_groups
from gputop.core.safe_text import clean
from gputop.core.slurm.detect import slurm_commands_here
from gputop.core.users import current_user

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
UUID = re.compile(r"GPU-[A-Za-z0-9-]{1,80}")
MAX_CONFIG_BYTES = 1 << 20
MAX_INCLUDE_DEPTH = 4
MAX_CONFIG_FILES = 64


def plain_host_name(name: str) -> bool:
    """A host name as DNS has them (RFC 1123): nothing ssh, a shell or a terminal reads."""
    return len(name) <= 253 and HOST_NAME.fullmatch(name) is not None


def _config_patterns(
    path: Path, home: Path, depth: int = 0, seen: set[str] | None = None
) -> list[str]:
    """The ``Host`` patterns of an ssh config and of the files it ``Include``s: each file
    read once, at most ``MAX_CONFIG_FILES`` of them (includes that fan out, or include
    each other, would otherwise be read thousands of times while the dashboard waits)."""
    seen = set() if seen is None else seen
    key = os.path.realpath(path)
    if key in seen or len(seen) >= MAX_CONFIG_FILES:
        return []
    seen.add(key)
    try:
        text = read_regular_file(path, MAX_CONFIG_BYTES)[1].decode("utf-8", "replace")
    except OSError:
        return []
    patterns: list[str] = []
    for line in text.splitlines():
        words = line.strip().replace("=", " ", 1).split()
        if not words or words[0].startswith("#"):
            continue
        keyword = words[0].lower()
        if keyword == "host":
            patterns += words[1:]
        elif keyword == "include" and depth < MAX_INCLUDE_DEPTH:
            for item in words[1:]:
                where = Path(os.path.expanduser(item))
                where = where if where.is_absolute() else home / ".ssh" / where
                found = itertools.islice(glob.iglob(str(where)), MAX_CONFIG_FILES)
                for each in sorted(found):
                    patterns += _config_patterns(Path(each), home, depth + 1, seen)
    return patterns


def _ssh_names(name: str, patterns: list[str]) -> bool:
    """ssh's rule: a pattern matches, no negated one does; a lone ``*`` names no host."""
    name = name.lower()
    if any(p.startswith("!") and fnmatch.fnmatchcase(name, p[1:].lower()) for p in patterns):
        return False
    return any(
        p != "*" and not p.startswith("!") and fnmatch.fnmatchcase(name, p.lower())
        for p in patterns
    )


def ssh_destination(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """``name`` is one the user gave the lab: in hosts.toml or the ssh config."""
    env = os.environ if environ is None else environ
    try:
        groups = load_groups(config_path(env))
    except GputopError:
        groups = {}
    if any(name in hosts for hosts in groups.values()):
        return True
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    config = settings.SSH_CONFIG.read(env)
    path = Path(config) if config else home / ".ssh" / "config"
    return _ssh_names(name, _config_patterns(path, home))


def launchable(gpu: FleetGpu) -> bool:
    return gpu.index is not None and gpu.uuid is not None and UUID.fullmatch(gpu.uuid) is not None


def node_snapshot(node: FleetNode, now: float) -> Snapshot:
    """The node's cards as Prometheus shows them, for the lab's launch dialog (its preview
    and pinning by UUID); names cleaned, every other figure already checked."""
    gpus = tuple(
        GpuSample(
            physical_index=int(gpu.index or 0),
            uuid=gpu.uuid,
            name=clean(gpu.name) if gpu.name else None,
            pci_bus_id=None,
            memory_total_bytes=gpu.memory_total_bytes,
            memory_used_bytes=gpu.memory_used_bytes,
            memory_free_bytes=gpu.memory_free_bytes,
            utilization_gpu_percent=None
            if gpu.utilization_gpu is None
            else round(gpu.utilization_gpu),
        )
        for gpu in node.sorted_gpus()
        if launchable(gpu)
    )
    return Snapshot(node.host, None, None, None, now, gpus)


def launch_advice(node: FleetNode, environ: Mapping[str, str] | None = None) -> Text:
    """What to run where the dashboard does not launch itself (cleaned text)."""
    env = os.environ if environ is None else environ
    text = Text()
    free = node.free_gpus
    if node.state != "up":
        text.append(f"{clean(node.host)} is {node.state}: nothing is launched there.\n")
        return text
    if not free:
        text.append(f"{clean(node.host)} has no free card now.\n")
        return text
    if not plain_host_name(node.host):
        text.append(
            f"{clean(node.host)!r} is not a plain host name (letters, digits, '-' and '.'): "
            "nothing is launched there from here.\n"
        )
        return text
    text.append(
        f"{len(free)} free on {node.host}, which is not in hosts.toml nor a Host of your ssh "
        "config (docs/lab.md), so it is not launched from here.\n\n"
    )
    if slurm_commands_here(env):
        text.append("On this Slurm cluster, ask Slurm for the cards:\n\n")
        text.append(f"  gputop run --slurm --gpus {len(free)} -- COMMAND\n\n")
    text.append("Where you can ssh to it:\n\n")
    text.append(f"  gputop run --hosts {node.host} --auto {len(free)} -- COMMAND\n")
    return text


def launch_screen(
    node: FleetNode, now: float, environ: Mapping[str, str] | None = None
) -> Screen[Any] | Text:
    """The lab's launch dialog on ``node``'s free cards where it is an ssh destination, else
    the advice of :func:`launch_advice`."""
    free = [gpu for gpu in node.free_gpus if launchable(gpu)]
    if node.state != "up" or not free or not plain_host_name(node.host):
        return launch_advice(node, environ)
    if not ssh_destination(node.host, environ):
        return launch_advice(node, environ)
    from gputop.tui.lab.remote_screens import RemoteLaunchScreen
    from gputop.tui.screens.launch import LaunchContext

    user = current_user()
    jobs = JobsService(None, user=user, cwd="", job_environ={}, report=lambda *_: None)
    context = LaunchContext(
        snapshot=node_snapshot(node, now),
        physical_indices=tuple(int(gpu.index or 0) for gpu in free),
        user=user,
        active_jobs=(),
        cwd="",
        environ={},
        jobs=jobs,  # this machine's store: the dialog's earlier commands
    )
    return RemoteLaunchScreen(context, node.host, None)
