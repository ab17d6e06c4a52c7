"""``gputop pick --hosts`` and ``gputop run --hosts --auto N``: free cards across servers.

Each host is judged by its own readings with the same free-card policy as the local
``pick`` (gputop/core/free_cards.py): its own user (the remote account the agent runs
as), its own running and waiting gputop jobs. The first host in the order given that has
N free cards wins, so the order of ``--hosts`` is a preference. Reduced-mode hosts are
judged too, but nvidia-smi names no process owners, so any process makes a card busy.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence

from gputop.cli.lab_common import host_label, hosts_timeout, open_lab
from gputop.core.errors import GputopError, UsageError
from gputop.core.free_cards import FreePolicy, NotEnoughFreeGpus, pick_free
from gputop.core.install_advice import install_advice
from gputop.core.numbers import strict_json
from gputop.core.records import frozen
from gputop.core.remote import remote_jobs
from gputop.core.remote.host_summary import active_job_gpus
from gputop.core.remote.lab import Lab, settled
from gputop.core.remote.remote_command import remote_gputop_command
from gputop.core.remote.status import HostStatus, LinkState, Mode
from gputop.core.remote.transport import ssh_argv
from gputop.core.safe_text import clean
from gputop.core.units import counted
from gputop.core.users import current_user
from gputop.core.visibility import pin_environment


class NoHostHasFreeGpus(GputopError):
    exit_code = 1


@frozen(slots=False)
class HostPick:
    status: HostStatus
    physical_indices: list[int]
    uuids: list[str]
    cuda_visible_devices: str


def pick_on_host(
    status: HostStatus, count: int, policy: FreePolicy, use_uuids: bool = True
) -> HostPick:
    """``count`` free cards on this host, or NotEnoughFreeGpus / GputopError saying why."""
    snapshot = status.snapshot
    if snapshot is None or status.state not in (LinkState.LIVE,):
        raise GputopError(status.describe())
    user = status.user if status.mode is not Mode.LOCAL else current_user()
    active = active_job_gpus(status.jobs)
    picked = pick_free(snapshot, count, policy, user or "", active)
    pinning = pin_environment(
        snapshot.gpus, picked, use_uuids=use_uuids, driver_version=snapshot.driver_version
    )
    uuids = [device.uuid for device in pinning.devices if device.uuid]
    return HostPick(status, picked, uuids, pinning.env["CUDA_VISIBLE_DEVICES"])


def first_host_with(
    statuses: Sequence[HostStatus],
    count: int,
    policy: FreePolicy,
    use_uuids: bool = True,
    need_full: bool = False,
) -> tuple[HostPick | None, list[str]]:
    """The first host with ``count`` free cards, and why each host before it had not."""
    reasons: list[str] = []
    for status in statuses:
        if need_full and status.mode is Mode.REDUCED:
            reasons.append(
                f"{host_label(status)}: reduced mode (no gputop there to launch with; "
                f"{clean(install_advice(status.host))})"
            )
            continue
        try:
            return pick_on_host(status, count, policy, use_uuids), reasons
        except NotEnoughFreeGpus as error:
            detail = "\n    ".join(clean(line) for line in str(error).splitlines())
            reasons.append(f"{host_label(status)}: {detail}")
        except GputopError as error:
            reasons.append(f"{host_label(status)}: {clean(str(error))}")
    return None, reasons


def run_pick(args: argparse.Namespace) -> int:
    policy = FreePolicy(min_free_mib=args.min_free_mib, max_util_percent=args.max_util)
    with open_lab(args) as lab:
        lab.wait_all(settled, hosts_timeout(args))
        found, reasons = first_host_with(
            lab.statuses(), args.count, policy, use_uuids=args.format == "uuid"
        )
    if found is None:
        raise NoHostHasFreeGpus(_none_free(args.count, reasons))
    if args.json:
        document = {
            "host": found.status.host,
            "physical_indices": found.physical_indices,
            "uuids": found.uuids,
            "cuda_visible_devices": found.cuda_visible_devices,
        }
        print(strict_json(document))
    else:
        print(f"{host_label(found.status)} {found.cuda_visible_devices}")
    return 0


def _none_free(count: int, reasons: Sequence[str]) -> str:
    lines = [f"No host has {count} free GPU{'s' if count != 1 else ''}:"]
    lines.extend(f"  {reason}" for reason in reasons)
    return "\n".join(lines)


def run_launch(args: argparse.Namespace, command: list[str]) -> int:
    """``run --hosts H --auto N [--wait] -- CMD``: pick a host, then ``gputop run`` there."""
    if args.auto is None:
        raise UsageError("With --hosts, give --auto N: gputop picks the host and its cards.")
    if args.tmux:
        raise UsageError("--tmux cannot be used with --hosts: remote jobs run detached.")
    policy = FreePolicy(min_free_mib=args.min_free_mib, max_util_percent=args.max_util)
    with open_lab(args) as lab:
        lab.wait_all(settled, hosts_timeout(args))
        found, reasons = first_host_with(lab.statuses(), args.auto, policy, need_full=True)
        if found is None and args.wait:
            found = _wait_for_host(lab, args.auto, policy)
    if found is None:
        raise NoHostHasFreeGpus(_none_free(args.auto, reasons))
    remote = ["gputop", "run", "--gpus", ",".join(found.uuids)]
    remote += ["--min-free-mib", str(args.min_free_mib), "--max-util", str(args.max_util)]
    remote += ["--grace", str(args.grace)]
    for option, value in (("--name", args.name), ("--cwd", args.cwd)):
        remote += [option, value] if value else []
    if args.json:
        remote.append("--json")
    remote += ["--", *command]
    print(
        f"gputop: launching on {host_label(found.status)}, GPUs "
        f"{','.join(str(i) for i in found.physical_indices)}: {clean(shlex.join(command))}",
        file=sys.stderr,
    )
    # As the lab's remote actions: at most ACTION_TIMEOUT_S, and the first MAX_ANSWER_BYTES
    # of each stream kept (held whole, with no time limit, a host that never ended its
    # answer held run --hosts for ever, growing).
    try:
        answer = remote_jobs.run_bounded(ssh_argv(found.status.host, remote_gputop_command(remote)))
    except OSError as error:
        print(f"gputop: cannot run ssh ({clean(str(error))})", file=sys.stderr)
        return 1
    if answer is None:
        print(
            f"gputop: {host_label(found.status)} did not answer within "
            f"{remote_jobs.ACTION_TIMEOUT_S:g} s; the job may have started there "
            "(gputop jobs there lists it).",
            file=sys.stderr,
        )
        return 1
    returncode, stdout, stderr = answer
    # The remote's words reach this terminal only cleaned (docs/security.md).
    for line in stdout.splitlines():
        print(clean(line))
    for line in stderr.splitlines():
        print(clean(line), file=sys.stderr)
    return returncode if returncode != 255 else 1


def _wait_for_host(lab: Lab, count: int, policy: FreePolicy) -> HostPick:
    """Watch every host until one has ``count`` free cards (Ctrl-C gives up)."""
    names = ", ".join(clean(link.host) for link in lab.links)
    verb = "is" if count == 1 else "are"
    print(
        f"gputop: waiting until {counted(count, 'GPU')} {verb} free on one of: {names}",
        file=sys.stderr,
    )
    while True:
        found, _ = first_host_with(lab.statuses(), count, policy, need_full=True)
        if found is not None:
            return found
        time.sleep(0.5)
