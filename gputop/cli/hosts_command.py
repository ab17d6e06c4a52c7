"""``gputop hosts install HOST...``: install this gputop on GPU servers over ssh.

Hosts are ssh destinations or group names from hosts.toml, as for ``--hosts``; each is
installed in its own thread (one ssh each) and reported in the order given, saying what
happened or why not (gputop/core/remote/installer.py, docs/lab.md).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from gputop import DISTRIBUTION
from gputop.cli.arg_types import add_commands, seconds
from gputop.core.errors import UsageError
from gputop.core.safe_text import clean

MAX_PARALLEL_HOSTS = 8


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    hosts = commands.add_parser(
        "hosts",
        help="act on the lab's GPU servers (install gputop there)",
        description="Act on the lab's GPU servers.",
    )
    actions = add_commands(hosts, title="actions", metavar="ACTION", required=True)
    install = actions.add_parser(
        "install",
        help="copy this gputop's wheel to each host over your ssh and install it there",
        description="Copy a wheel of gputop (from `make dist`) to each host over your own ssh "
        "and install it there: with pipx where the host has it, else with "
        "`python3 -m pip install --user`. Says per host what happened.",
    )
    install.add_argument(
        "hosts",
        nargs="+",
        metavar="HOST",
        help="ssh destinations or group names from $XDG_CONFIG_HOME/gputop/hosts.toml",
    )
    install.add_argument(
        "--wheel",
        type=Path,
        metavar="PATH",
        help="the wheel to install (default: this version's wheel in ./dist, then in the "
        "checkout's dist/; `make dist` makes it)",
    )
    install.add_argument(
        "--pip-args",
        default="",
        metavar="ARGS",
        help="options for pip there, split like a shell would; write it with '=', as in "
        "--pip-args='--no-index --find-links /shared/wheels' (servers without the package "
        "index)",
    )
    install.add_argument(
        "--timeout",
        type=seconds(1.0, 24 * 3600.0),
        default=600.0,
        metavar="SECONDS",
        help="how long one host may take (default 600, from 1 to 86400)",
    )
    install.set_defaults(run=run_install)


def run_install(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor  # only here: every start pays imports

    from gputop.core.remote.hosts import HostEntry, config_path, load_groups, resolve_hosts
    from gputop.core.remote.installer import InstallResult, check_wheel, install_on_host

    try:
        pip_args = shlex.split(args.pip_args)
    except ValueError as error:
        raise UsageError(f"--pip-args {args.pip_args!r} cannot be split: {error}.") from None
    wheel = check_wheel(args.wheel) if args.wheel is not None else default_wheel()
    entries = resolve_hosts(",".join(args.hosts), load_groups(config_path()))

    def install(entry: HostEntry) -> InstallResult:
        if entry.problem:
            return InstallResult(entry.name, False, None, entry.problem)
        if entry.local:
            return InstallResult(
                entry.name, False, None, f"this machine: install here with pipx install {wheel}"
            )
        return install_on_host(entry.name, wheel, pip_args, timeout_s=args.timeout)

    print(f"Installing {wheel.name} on {len(entries)} host(s)...", flush=True)
    failures = 0
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL_HOSTS) as pool:
        for result in pool.map(install, entries):
            verdict = "ok" if result.ok else "FAILED"
            print(f"{clean(result.host)}: {verdict}: {clean(result.detail)}", flush=True)
            failures += not result.ok
    return 1 if failures else 0


def default_wheel() -> Path:
    """This version's wheel in ./dist, else in the checkout's dist/ (where `make dist` puts
    it when gputop runs from a clone)."""
    from gputop.core.build_info import distribution_version
    from gputop.core.remote.installer import wheel_name

    name = wheel_name(distribution_version())
    checkout = Path(__file__).resolve().parents[2]
    for directory in (Path.cwd() / "dist", checkout / "dist"):
        if (directory / name).is_file():
            return directory / name
    raise UsageError(
        f"No wheel {name} in ./dist or {checkout / 'dist'}: run `make dist` in gputop's "
        f"clone, or give --wheel PATH (a wheel of {DISTRIBUTION})."
    )
