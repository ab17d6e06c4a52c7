"""``gputop run``: launch a command pinned to chosen GPUs, detached, and return at once
(``--auto N`` picks free cards, ``--wait`` queues the job until they are free).
"""

from __future__ import annotations

import argparse
import os
import shlex
from dataclasses import replace

from gputop.cli.arg_types import add_notify_argument, count, seconds
from gputop.cli.claims_common import sample
from gputop.cli.job_store import open_store_to_record
from gputop.cli.lab_common import add_hosts_arguments
from gputop.cli.pick_command import active_job_gpus, add_free_arguments, warn
from gputop.cli.slurm_run import (
    add_slurm_arguments,
    run_slurm_submit,
    slurm_options_without_slurm,
)
from gputop.core import settings
from gputop.core.claims.jobs import IGNORED_ENV, check_claims_known, check_launch_claims
from gputop.core.claims.view import UNKNOWN, UNSAFE, ClaimsView, read_claims
from gputop.core.errors import UsageError
from gputop.core.free_cards import (
    FreePolicy,
    NotEnoughFreeGpus,
    launch_warnings,
    pick_free_targets,
)
from gputop.core.jobs.command import missing_program
from gputop.core.jobs.launch import (
    LaunchRequest,
    PreparedLaunch,
    check_gpu_count,
    launch_job,
    prepare_launch,
)
from gputop.core.jobs.launchers import rank_lines
from gputop.core.jobs.logs import MAX_LOG_MAX_BYTES, MIN_LOG_MAX_BYTES
from gputop.core.jobs.model import DEFAULT_GRACE_S, MAX_GRACE_S, Job, JobState, RunMode
from gputop.core.jobs.notify import notify_argv
from gputop.core.jobs.store import JobStore
from gputop.core.mig_targets import card_label, pinned_targets, resolve_gpus
from gputop.core.model import Snapshot
from gputop.core.numbers import parse_size, strict_json
from gputop.core.probes import DriverProbe
from gputop.core.probes.driver_mapping import check_launch
from gputop.core.safe_text import clean
from gputop.core.sampling.source import environment_for_jobs
from gputop.core.units import counted
from gputop.core.users import current_user
from gputop.core.visibility import Visibility, resolve_visibility
from gputop.core.visibility.inverse import MIG_HIDES
from gputop.core.visibility.order import PCI_BUS_ID

EXAMPLES = """examples:
  gputop run --gpus 3,1 -- python train.py --lr 3e-4
      GPU 3 is cuda:0, GPU 1 is cuda:1
  gputop run --gpus GPU-5a9e -- ./train.sh
      a card by UUID prefix
  gputop run --gpus 0:1 -- python train.py
      MIG device 1 of GPU 0 (nvidia-smi -L)
  gputop run --gpus MIG-4fd9 -- python train.py
      a MIG instance by UUID prefix
  gputop run --auto 2 --wait -- python train.py
      the first 2 cards that are free
  gputop run --gpus 0 -- "python a.py | tee out.txt"
      one argument: runs under $SHELL -c
  gputop run --hosts gpu1,gpu2 --auto 2 -- python train.py
      the first server with 2 free
  gputop run --slurm --gpus 1 --time 1:00:00 -- python train.py
      submitted through sbatch
"""


def add_parser(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "run",
        parents=[parent],
        help="launch a command pinned to chosen GPUs, detached (survives logout)",
        description="Launch a command pinned to chosen GPUs. It runs detached (its own\n"
        "session, output to a log), so it survives logout; gputop prints the job id,\n"
        "which physical GPU each cuda:N is, and the log path, and returns at once.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cards = parser.add_mutually_exclusive_group()
    cards.add_argument(
        "--gpus",
        metavar="LIST",
        help="physical indices or UUID prefixes, comma-separated, in the cuda order wanted "
        "(--gpus 3,1 makes GPU 3 cuda:0); a MIG instance as MIG-<uuid prefix> or GPU:DEVICE "
        "(0:1 is MIG device 1 of GPU 0, as nvidia-smi -L numbers them)",
    )
    cards.add_argument(
        "--auto",
        type=count(1),
        metavar="N",
        help="pick N free GPUs by the free-card policy",
    )
    add_free_arguments(parser)
    parser.add_argument("--name", help="a name for the job (default: the script's name)")
    parser.add_argument("--cwd", metavar="DIR", help="working directory (default: this one)")
    parser.add_argument(
        "--tmux", action="store_true", help="run in a new tmux window (only inside tmux)"
    )
    parser.add_argument(
        "--wait", action="store_true", help="queue the job until its cards are free"
    )
    parser.add_argument(
        "--grace",
        type=seconds(0, MAX_GRACE_S),
        metavar="SECONDS",
        default=DEFAULT_GRACE_S,
        help=f"when stopped: seconds between SIGTERM and SIGKILL (default {DEFAULT_GRACE_S:g})",
    )
    add_notify_argument(parser, "when the job starts after waiting and when it ends")
    parser.add_argument(
        "--log-max",
        type=log_size,
        metavar="SIZE",
        help="cap the job's log at SIZE (bytes, or 64k, 512M, 2G; at least 64k): its "
        f"beginning and newest lines are kept (default ${settings.LOG_MAX.name}, else 1G)",
    )
    parser.add_argument(
        "--ignore-claims",
        action="store_true",
        help="launch even on cards another user claimed (docs/claims.md): warned, and the job "
        f"is marked so ({IGNORED_ENV} in its environment)",
    )
    parser.add_argument("--json", action="store_true", help="print the job as JSON instead")
    add_hosts_arguments(parser)
    add_slurm_arguments(parser)
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run"
    )
    parser.set_defaults(run=run)


def log_size(text: str) -> int:
    """``--log-max``: a size from 64 KiB to 1 PiB."""
    try:
        value = parse_size(text, "--log-max")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if not MIN_LOG_MAX_BYTES <= value <= MAX_LOG_MAX_BYTES:
        raise argparse.ArgumentTypeError(
            f"--log-max {text!r}: give a size from 64k to 1P (1024 TiB)"
        )
    return value


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError(
            "No command given: put it after --, e.g. gputop run --gpus 0 -- python train.py"
        )
    if args.notify_command and (args.slurm or getattr(args, "hosts", None)):
        raise UsageError(
            "--notify-command works for jobs launched on this machine: a Slurm job or one "
            "on another host has no gputop supervisor here to run it. Use gputop jobs wait "
            "--notify-command CMD where the job runs."
        )
    if args.slurm:
        return run_slurm_submit(args, command)
    given = slurm_options_without_slurm(args)
    if given:
        raise UsageError(f"{given} is a Slurm option: add --slurm to submit through sbatch.")
    if args.gpus is None and args.auto is None:
        raise UsageError("Say which GPUs: --gpus LIST or --auto N (or --slurm).")
    if getattr(args, "hosts", None):
        from gputop.cli.lab_pick import run_launch

        return run_launch(args, command)
    policy = FreePolicy(min_free_mib=args.min_free_mib, max_util_percent=args.max_util)
    environ = environment_for_jobs(args.fake)
    environ.pop(IGNORED_ENV, None)  # a mark of the job this runs in, if any, is not this one's
    if args.wait:
        settings.WAIT_POLL.read(environ)
    # Everything is checked before the store is opened: a rejected run writes nothing, not
    # even the state directory.
    snapshot = sample(args.fake)
    wait_count = None
    indices: list[int | str]
    claims = read_claims(environ)
    if claims.state == UNSAFE:
        warn(claims.message)
    check_claims_known(claims, ignore=args.ignore_claims)  # before --auto picks around claims
    if args.auto is not None:
        check_gpu_count(snapshot, args.auto)
        active = active_job_gpus()
        blocked = {} if args.ignore_claims else claims.blocked_cards(snapshot)
        try:
            indices = pick_free_targets(
                snapshot, args.auto, policy, current_user(), active, claimed=blocked
            )
        except NotEnoughFreeGpus:
            if not args.wait:
                raise
            indices, wait_count = [], args.auto
    else:
        indices = resolve_gpus(snapshot, [args.gpus])
    in_the_way = check_launch_claims(
        claims, snapshot, indices, os.geteuid(), wait=args.wait, ignore=args.ignore_claims
    )
    request = LaunchRequest(
        command=command,
        physical_indices=indices,
        name=args.name,
        cwd=args.cwd,
        mode=RunMode.TMUX if args.tmux else RunMode.DETACHED,
        wait=args.wait,
        wait_count=wait_count,
        policy=policy,
        grace_s=args.grace,
        notify_command=tuple(notify_argv(args.notify_command)) if args.notify_command else (),
        log_max_bytes=args.log_max,
    )
    prepared = prepare_launch(request, snapshot, environ)
    if args.ignore_claims and claims.state == UNKNOWN:
        mark = f"claims cannot be read ({claims.message})"
        prepared = replace(prepared, env={**prepared.env, IGNORED_ENV: mark[:400]})
        warn(f"{claims.message}; launched anyway (--ignore-claims)")
    if args.ignore_claims and in_the_way:
        marks = ", ".join(_claim_marks(claims, snapshot, indices))
        prepared = replace(prepared, env={**prepared.env, IGNORED_ENV: marks})
        for said in in_the_way:
            warn(f"{said}; launched anyway (--ignore-claims)")
    with open_store_to_record("launched", "launch") as store:
        busy = [] if args.wait else busy_warnings(snapshot, indices, policy, store)
        job = launch_job(store, prepared, snapshot, environ)
    driver_seen, rules_wrong = None, None
    # the driver knows real cards only
    if job.env and not (args.fake or settings.FAKE.read(environ)):
        driver_seen, rules_wrong = check_launch(
            snapshot.gpus, snapshot.driver_version, job.env, DriverProbe()
        )
    if args.json:
        print(strict_json(job.to_json(), indent=2))
    else:
        print(describe_launch(job, snapshot, policy, prepared, driver_seen))
    missing = missing_program(job.command, job.uses_shell, job.cwd, environ)  # the usual failure
    for warning in (rules_wrong, *prepared.warnings, *busy, *mig_pinning_warnings(snapshot, job)):
        if warning:
            warn(warning)
    if missing:
        warn(missing)
    return 0


def _claim_marks(view: ClaimsView, snapshot: Snapshot, targets: list[int | str]) -> list[str]:
    """``GPU 2 (ana)`` for each card another user claimed: the job's mark."""
    marks = []
    for gpu in snapshot.gpus:
        for target in targets:
            mig = target if isinstance(target, str) else None
            if mig is None and target != gpu.physical_index:
                continue
            if mig is not None and all(m.uuid != mig for m in gpu.mig_devices):
                continue
            claim = view.blocking(gpu, os.geteuid(), mig)
            if claim is not None:
                where = f"GPU {gpu.physical_index}" if mig is None else mig
                marks.append(f"{where} ({claim.user})")
    return marks


def busy_warnings(
    snapshot: Snapshot, indices: list[int | str], policy: FreePolicy, store: JobStore
) -> list[str]:
    """What the launch dialog warns of on these cards (busy, claimed by a gputop job, in MIG
    mode), by the same policy code: ``run`` launches anyway, as the dialog does. Read before
    the job is recorded, so it is not its own claim."""
    active = [job for job in store.list_jobs() if job.is_active]
    return launch_warnings(snapshot, indices, current_user(), active, policy=policy)


def mig_pinning_warnings(snapshot: Snapshot, job: Job) -> list[str]:
    """Where the driver would expose only one of the job's pinned MIG instances."""
    visible = job.env.get("CUDA_VISIBLE_DEVICES")
    if not visible or "MIG-" not in visible:
        return []
    seen = resolve_visibility(snapshot.gpus, snapshot.driver_version, visible, PCI_BUS_ID)
    return [w.message for w in seen.warnings if w.code in MIG_HIDES]


def describe_launch(
    job: Job,
    snapshot: Snapshot,
    policy: FreePolicy,
    prepared: PreparedLaunch | None = None,
    driver_seen: Visibility | None = None,
) -> str:
    """What a person needs right after launching: id, mapping, how it runs, where its log is."""
    where = f"in tmux window gputop-{job.id}" if job.mode is RunMode.TMUX else "detached"
    queued = job.wait_for_free and job.state is JobState.WAITING  # --wait: not started yet
    said = f"queued, to run {where}" if queued else f"launched {where}"
    lines = [f"Job {job.id} ({clean(job.name)}) {said}."]
    if queued:
        wanted = (
            f"{counted(job.wait_count or 0, 'GPU')} {'is' if job.wait_count == 1 else 'are'} free"
            if not job.physical_indices
            else f"GPU{'s' if len(job.physical_indices) > 1 else ''} {job.gpus_text} "
            f"{'are' if len(job.physical_indices) > 1 else 'is'} free"
        )
        lines.append(f"  It waits until {wanted}: {policy.describe()}.")
    labels = card_labels(job, snapshot)
    if driver_seen is not None:  # the driver's answer is the mapping (driver_mapping.py)
        labels = [
            card_label(snapshot.gpus, d.mig_uuid or d.physical_index) for d in driver_seen.devices
        ]
        lines.append("  as the CUDA driver enumerates them:")
    lines.extend(f"  cuda:{logical} → {label}" for logical, label in enumerate(labels))
    if prepared is not None and prepared.launcher is not None:
        lines.extend(f"  {clean(line)}" for line in rank_lines(prepared.launcher, labels))
    if prepared is not None:
        lines.extend(f"  note: {clean(note)}" for note in prepared.notes)
    if job.env:
        lines.append("  env:  " + " ".join(f"{clean(k)}={clean(v)}" for k, v in job.env.items()))
    if job.uses_shell:
        shown = f"{job.command[0]} -c {shlex.quote(job.command_text)}  (it needs a shell)"
    else:
        shown = shlex.join(job.command)
    lines.append(f"  runs: {clean(shown)}")
    lines.append(f"  cwd:  {clean(job.cwd)}")
    lines.append(f"  log:  {clean(job.log_path)}")
    lines.append(
        f"Follow it: gputop jobs log {job.id} --follow    Stop it: gputop jobs stop {job.id}"
    )
    return "\n".join(lines)


def card_labels(job: Job, snapshot: Snapshot) -> list[str]:
    """``GPU 3  Tesla V100-SXM2-16GB  GPU-80af15aa`` for each cuda:N of the job, in order."""
    targets = pinned_targets(job.physical_indices, job.uuids)
    return [card_label(snapshot.gpus, target) for target in targets]
