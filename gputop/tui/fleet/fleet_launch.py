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
"""What one question reads of the ssh config and the files it includes, together."""
MAX_INCLUDE_DEPTH = 4
MAX_CONFIG_FILES = 64
MAX_INCLUDE_ENTRIES = 4096
"""The directory entries the ``Include`` globs of one question look at, together: a glob
like ``Include /*/*/*/*``, a directory of thousands of files, or thousands of ``Include``
lines walked the disk for as long as it took (5,000 lines on a directory of 5,000 files
looked at 25 million entries, half a minute)."""


def plain_host_name(name: str) -> bool:
    """A host name as DNS has them (RFC 1123): nothing ssh, a shell or a terminal reads."""
    return len(name) <= 253 and HOST_NAME.fullmatch(name) is not None


class SshConfigRead:
    """The ``Host`` patterns of an ssh config and of the files it ``Include``s, as ssh reads
    them (each file once, an Include's matches sorted, hidden names matched only by a
    pattern that starts with a dot), within the bounds above; ``cut`` names the bounds that
    stopped it ("" where none did: every file was read)."""

    def __init__(self) -> None:
        self.patterns: list[str] = []
        self.cut = ""
        self._seen: set[str] = set()
        self._entries = 0
        self._bytes = 0
        self._bounds: list[str] = []

    def _bound(self, what: str) -> None:
        if what not in self._bounds:
            self._bounds.append(what)
            self.cut = "its Include lines were followed up to " + ", ".join(self._bounds)

    def read(self, path: Path, home: Path, depth: int = 0) -> None:
        key = os.path.realpath(path)
        if key in self._seen:  # an Include loop (ssh gives up at 16 levels): read once
            return
        if len(self._seen) >= MAX_CONFIG_FILES:
            self._bound(f"{MAX_CONFIG_FILES} files")
            return
        if self._bytes >= MAX_CONFIG_BYTES:
            self._bound(f"{MAX_CONFIG_BYTES >> 20} MiB")
            return
        self._seen.add(key)
        try:
            info, data = read_regular_file(path, MAX_CONFIG_BYTES - self._bytes)
        except OSError:
            return
        self._bytes += len(data)
        if info.st_size > len(data):
            self._bound(f"{MAX_CONFIG_BYTES >> 20} MiB")
        for line in data.decode("utf-8", "replace").splitlines():
            words = line.strip().replace("=", " ", 1).split()
            if not words or words[0].startswith("#"):
                continue
            keyword = words[0].lower()
            if keyword == "host":
                self.patterns += words[1:]
            elif keyword == "include" and depth >= MAX_INCLUDE_DEPTH:
                self._bound(f"{MAX_INCLUDE_DEPTH} levels")
            elif keyword == "include":
                for item in words[1:]:
                    tilde = item == "~" or item.startswith("~/")
                    where = Path(f"{home}{item[1:]}" if tilde else os.path.expanduser(item))
                    where = where if where.is_absolute() else home / ".ssh" / where
                    for each in self._matches(str(where)):
                        self.read(Path(each), home, depth + 1)

    def _matches(self, pattern: str) -> list[str]:
        """glob(3)'s matches of ``pattern``, sorted, looking at no more directory entries
        than are left of ``MAX_INCLUDE_ENTRIES``."""
        if not glob.has_magic(pattern):
            return [pattern] if os.path.lexists(pattern) else []
        root, *parts = Path(pattern).parts
        found = [root]
        for at, part in enumerate(parts, 1):
            if not glob.has_magic(part):
                found = [os.path.join(each, part) for each in found]
                continue
            found = [
                os.path.join(each, name)
                for each in found
                for name in self._names(each, part, dirs_only=at < len(parts))
            ]
        if not glob.has_magic(parts[-1]):  # joined, never looked at
            found = [each for each in found if os.path.lexists(each)]
        return sorted(found)

    def _names(self, directory: str, part: str, dirs_only: bool) -> list[str]:
        names: list[str] = []
        if self._entries >= MAX_INCLUDE_ENTRIES:
            self._bound(f"{MAX_INCLUDE_ENTRIES:,} directory entries")
            return names
        try:
            with os.scandir(directory) as entries:
                for entry in itertools.islice(entries, MAX_INCLUDE_ENTRIES - self._entries):
                    self._entries += 1
                    name = entry.name
                    if name.startswith(".") and not part.startswith("."):
                        continue
                    if fnmatch.fnmatchcase(name, part) and (not dirs_only or _is_dir(entry)):
                        names.append(name)
        except (OSError, ValueError):  # ValueError: a NUL in the pattern, which no path holds
            pass
        if self._entries >= MAX_INCLUDE_ENTRIES:
            self._bound(f"{MAX_INCLUDE_ENTRIES:,} directory entries")
        return names


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def read_ssh_config(environ: Mapping[str, str] | None = None) -> SshConfigRead:
    """The ssh config the lab's ssh reads (``settings.SSH_CONFIG``, else ``~/.ssh/config``)
    and what it includes, within the bounds: files the user chose, read off the UI thread."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    config = settings.SSH_CONFIG.read(env)
    read = SshConfigRead()
    read.read(Path(config) if config else home / ".ssh" / "config", home)
    return read


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
    return destination_check(name, environ)[0]


def destination_check(name: str, environ: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Whether ``name`` is one the user gave the lab (in hosts.toml or the ssh config), and
    where it is not, the ssh config's ``cut`` (a Host past the bounds is not seen)."""
    env = os.environ if environ is None else environ
    try:
        groups = load_groups(config_path(env))
    except GputopError:
        groups = {}
    if any(name in hosts for hosts in groups.values()):
        return True, ""
    read = read_ssh_config(env)
    named = _ssh_names(name, read.patterns)
    return named, "" if named else read.cut


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


def launch_advice(node: FleetNode, environ: Mapping[str, str] | None = None, cut: str = "") -> Text:
    """What to run where the dashboard does not launch itself (cleaned text); ``cut``: how
    the ssh config's reading was cut short (``SshConfigRead.cut``)."""
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
    if cut:
        text.append(
            f"Your ssh config was read only in part: {cut}. A Host past that is not seen.\n\n"
        )
    if slurm_commands_here(env):
        text.append("On this Slurm cluster, ask Slurm for the cards:\n\n")
        text.append(f"  gputop run --slurm --gpus {len(free)} -- COMMAND\n\n")
    text.append("Where you can ssh to it:\n\n")
    text.append(f"  gputop run --hosts {node.host} --auto {len(free)} -- COMMAND\n")
    return text


def launch_check(node: FleetNode, environ: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """For :func:`launch_screen`: whether ``node`` is launched on over ssh, and the ssh
    config's ``cut``. It reads the files the user chose (hosts.toml, the ssh config and what
    it includes, a home directory on NFS perhaps): the dashboard calls it off the UI thread."""
    free = [gpu for gpu in node.free_gpus if launchable(gpu)]
    if node.state != "up" or not free or not plain_host_name(node.host):
        return False, ""
    return destination_check(node.host, environ)


def launch_screen(
    node: FleetNode,
    now: float,
    environ: Mapping[str, str] | None = None,
    checked: tuple[bool, str] | None = None,
) -> Screen[Any] | Text:
    """The lab's launch dialog on ``node``'s free cards where it is an ssh destination, else
    the advice of :func:`launch_advice`; ``checked``: :func:`launch_check`'s answer, read
    here where not given."""
    named, cut = launch_check(node, environ) if checked is None else checked
    if not named:
        return launch_advice(node, environ, cut)
    free = [gpu for gpu in node.free_gpus if launchable(gpu)]
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
