"""``gputop run --slurm``: submit through ``sbatch``; Slurm chooses the cards (docs/slurm.md).
A submission Slurm refuses prints Slurm's own message and records nothing.
"""

from __future__ import annotations

import argparse
import os

from gputop.cli.arg_types import argument_type
from gputop.cli.job_store import open_store_to_record
from gputop.core.errors import UsageError
from gputop.core.jobs.command import default_name, plan_command
from gputop.core.jobs.model import Job
from gputop.core.numbers import MAX_ID_DIGITS, is_ascii_digits, quoted, strict_json
from gputop.core.safe_text import clean
from gputop.core.slurm.record import submit_and_record
from gputop.core.slurm.submit import SlurmRequest, check_gres


def add_slurm_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "Slurm (docs/slurm.md)", "submit through sbatch instead; Slurm chooses the cards"
    )
    group.add_argument(
        "--slurm",
        action="store_true",
        help="submit through sbatch; with it --gpus N is a number of GPUs",
    )
    group.add_argument("--partition", metavar="P", help="the Slurm partition")
    group.add_argument(
        "--gres", metavar="gpu:TYPE:N", type=argument_type(check_gres), help="Slurm GRES"
    )
    group.add_argument("--nodelist", metavar="H", help="the node(s) to run on")
    group.add_argument("--time", metavar="T", help="time limit, as sbatch --time reads it")


def slurm_options_without_slurm(args: argparse.Namespace) -> str | None:
    """The first Slurm-only option given without ``--slurm``, to refuse it."""
    for name in ("partition", "gres", "nodelist", "time"):
        if getattr(args, name, None):
            return f"--{name}"
    return None


def slurm_request(args: argparse.Namespace, command: list[str]) -> SlurmRequest:
    """The request from the arguments; ``UsageError`` for what only Slurm-less runs take."""
    if args.auto is not None or args.wait or args.tmux or getattr(args, "hosts", None):
        raise UsageError(
            "--slurm cannot be combined with --auto, --wait, --tmux or --hosts: Slurm "
            "chooses the cards and queues the job itself."
        )
    gpus: int | None = None
    if args.gpus is not None:
        # ASCII digits only: "²".isdigit() is True and int() refuses it; int("٣") is 3
        if not is_ascii_digits(args.gpus) or len(args.gpus) > MAX_ID_DIGITS or int(args.gpus) < 1:
            raise UsageError(
                f"With --slurm, --gpus is a number of GPUs (Slurm chooses which), not "
                f"{quoted(args.gpus)}."
            )
        gpus = int(args.gpus)
    if gpus is not None and args.gres:
        raise UsageError("Give either --gpus N or --gres gpu:TYPE:N, not both.")
    cwd = os.path.abspath(os.path.expanduser(args.cwd)) if args.cwd else os.getcwd()
    if not os.path.isdir(cwd):
        raise UsageError(f"The working directory {cwd} does not exist.")
    plan = plan_command(command, cwd=cwd)
    return SlurmRequest(
        argv=plan.argv,
        name=args.name or default_name(plan),
        cwd=cwd,
        partition=args.partition,
        gpus=gpus,
        gres=args.gres,
        nodelist=args.nodelist,
        time_limit=args.time,
    )


def run_slurm_submit(args: argparse.Namespace, command: list[str]) -> int:
    request = slurm_request(args, command)
    text = plan_command(command, cwd=request.cwd).text or " ".join(command)
    with open_store_to_record("submitted", "submit") as store:
        job = submit_and_record(store, request, text)
    if args.json:
        print(strict_json(job.to_json(), indent=2))
    else:
        print(describe_submission(job, request))
    return 0


def describe_submission(job: Job, request: SlurmRequest) -> str:
    lines = [
        f"Job {job.id} ({clean(job.name)}) submitted to Slurm as job {job.slurm_job_id}.",
        f"  asks: {request.asks_text}",
        "  cards: Slurm chooses them; gputop jobs shows which once it runs",
        f"  runs: {clean(job.command_text)}",
        f"  cwd:  {clean(job.cwd)}",
        f"  log:  {clean(job.log_path)}  (Slurm's output file)",
        f"Follow it: gputop jobs log {job.id} --follow    Cancel it: gputop jobs stop {job.id}",
    ]
    return "\n".join(lines)
