"""Which hosts the lab view watches: ``--hosts gpu1,gpu2`` or groups from hosts.toml.

``$XDG_CONFIG_HOME/gputop/hosts.toml`` (``~/.config/gputop/hosts.toml`` by default)::

    [groups]
    lab = ["gpu1", "gpu2", "local"]
    big = ["dgx-a", "dgx-b"]

Each comma-separated item of ``--hosts`` is a group's name (replaced by its hosts) or a
host: an ssh destination (an alias from ``~/.ssh/config``, ``user@name``), or ``local`` /
``localhost`` for this machine, sampled without ssh. A name that cannot be an ssh
destination is kept with a problem, so it shows a clear status while the others work.
See docs/lab.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gputop.core.errors import GputopError, UsageError
from gputop.core.private_files import read_regular_file
from gputop.core.records import frozen
from gputop.core.remote.local_link import LOCAL_NAMES
from gputop.core.remote.transport import check_destination
from gputop.core.safe_text import clean

HOSTS_FILE = "hosts.toml"
MAX_HOSTS_FILE_BYTES = 1 << 20
"""1 MiB: tens of thousands of host names, the same bound as an ssh config's
(``fleet_launch.MAX_CONFIG_BYTES``); a larger file is refused, not read whole."""


class HostsFileError(GputopError):
    exit_code = 2


@frozen(slots=False)
class HostEntry:
    name: str
    local: bool = False
    problem: str | None = None
    """Why this name cannot be reached at all (not a valid ssh destination)."""


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/gputop/hosts.toml``; a relative XDG value is ignored, as the
    XDG spec says."""
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(env.get("HOME", "~")).expanduser() / ".config"
    return base / "gputop" / HOSTS_FILE


def load_groups(path: Path) -> dict[str, list[str]]:
    """The ``[groups]`` table of hosts.toml; {} when the file does not exist."""
    try:
        data = read_regular_file(path, MAX_HOSTS_FILE_BYTES + 1)[1]
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise HostsFileError(f"Cannot read {path}: {error.strerror or error}.") from None
    if len(data) > MAX_HOSTS_FILE_BYTES:
        raise HostsFileError(
            f"{path} is larger than 1 MiB, far more than a list of hosts: check what it "
            "holds (docs/lab.md shows one)."
        )
    document = _parse_toml(path, data)
    groups = document.get("groups", {})
    if not isinstance(groups, dict):
        raise HostsFileError(f"{path}: 'groups' must be a table: [groups] then name = [...].")
    result: dict[str, list[str]] = {}
    for name, hosts in groups.items():
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise HostsFileError(
                f"{path}: groups.{clean(name)} must be a list of host names, e.g. "
                f'{clean(name)} = ["gpu1", "gpu2"].'
            )
        result[name] = hosts
    return result


def _parse_toml(path: Path, data: bytes) -> dict[str, Any]:
    try:
        import tomllib as toml  # Python 3.11+
    except ModuleNotFoundError:
        try:
            import tomli as toml  # type: ignore[no-redef,unused-ignore]
        except ModuleNotFoundError:
            raise HostsFileError(
                f"Reading {path} needs Python 3.11 or the tomli package (pip install "
                "tomli); or name the hosts directly: --hosts gpu1,gpu2."
            ) from None
    try:
        return toml.loads(data.decode("utf-8"))
    except (toml.TOMLDecodeError, UnicodeDecodeError) as error:
        raise HostsFileError(f"{path} is not valid TOML: {error}.") from None
    except RecursionError:  # the reader recurses once a level: 100,000 '[' fit in 1 MiB
        raise HostsFileError(
            f"{path} is not valid TOML: nested too deeply (docs/lab.md shows a list of hosts)."
        ) from None


def resolve_hosts(spec: str, groups: Mapping[str, list[str]]) -> list[HostEntry]:
    """The hosts ``spec`` names, groups expanded, each once, in the order given."""
    items = [item.strip() for item in spec.split(",")]
    if not any(items):
        raise UsageError("--hosts needs host names or a group: --hosts gpu1,gpu2.")
    names: list[str] = []
    for item in items:
        if not item:
            continue
        names.extend(groups.get(item, [item]))
    if not names:  # only groups, each of them empty: nothing to watch, and nothing said why
        empty = [repr(clean(item)) for item in items if item]
        which = f"the group {empty[0]}" if len(empty) == 1 else f"the groups {', '.join(empty)}"
        raise UsageError(
            f"--hosts: {which} in hosts.toml lists no hosts: add host names to it "
            '(lab = ["gpu1", "gpu2"]) or name hosts directly: --hosts gpu1,gpu2.'
        )
    return [_entry(name) for name in dict.fromkeys(names)]


def _entry(name: str) -> HostEntry:
    if name in LOCAL_NAMES:
        return HostEntry(name, local=True)
    try:
        check_destination(name)
    except UsageError as error:
        return HostEntry(name, problem=str(error))
    return HostEntry(name)
