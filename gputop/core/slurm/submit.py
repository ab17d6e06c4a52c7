"""Submitting a job through ``sbatch``, and cancelling it with ``scancel`` (docs/slurm.md).

Never ``sbatch --wrap`` (a shell string): the command goes into a private batch script,
quoted by ``shlex.join`` (or the user's text under ``$SHELL -c``), submitted with ``sbatch
--parsable`` and removed. Every option is one ``--name=value`` argv element, so no value is
ever read as another option.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from gputop.core.errors import UsageError
from gputop.core.numbers import digits_within, quoted
from gputop.core.private_files import PRIVATE_FILE_MODE, open_private_subdir, private_dir_fd
from gputop.core.records import frozen
from gputop.core.safe_text import clean
from gputop.core.slurm.commands import SlurmError, run_slurm, slurm_message
from gputop.core.slurm.queue import MAX_JOB_ID

SCRIPTS_DIR = "slurm"
OUTPUT_PATTERN = "slurm-%j.log"
"""Slurm's output file in the job store's logs directory; ``%j`` is Slurm's job id."""
_GRES = re.compile(r"^gpu(:[A-Za-z0-9_.-]+)?:[0-9]+$")
_PARSABLE = re.compile(r"^([0-9]+)(;.*)?$")


@frozen
class SlurmRequest:
    """What ``gputop run --slurm`` asks Slurm for. Slurm checks every value itself."""

    argv: tuple[str, ...]
    """The command as it will be exec'd (``plan_command``'s argv)."""
    name: str
    cwd: str
    partition: str | None = None
    gpus: int | None = None
    gres: str | None = None
    nodelist: str | None = None
    time_limit: str | None = None

    def sbatch_options(self) -> list[str]:
        options = [f"--job-name={self.name}", f"--chdir={self.cwd}", "--open-mode=append"]
        if self.partition:
            options.append(f"--partition={self.partition}")
        if self.gpus is not None:
            options.append(f"--gpus={self.gpus}")
        if self.gres:
            options.append(f"--gres={self.gres}")
        if self.nodelist:
            options.append(f"--nodelist={self.nodelist}")
        if self.time_limit:
            options.append(f"--time={self.time_limit}")
        return options

    @property
    def cards_text(self) -> str:
        """``1 GPU``, ``gpu:a100:2``: what was asked for, in the preview."""
        if self.gres:
            return self.gres
        if self.gpus is not None:
            return f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}"
        return "no GPU"

    @property
    def asks_text(self) -> str:
        """``1 GPU in partition debug for 1:00:00``: the request, for previews (cleaned)."""
        text = self.cards_text
        if self.partition:
            text += f" in partition {self.partition}"
        if self.nodelist:
            text += f" on {self.nodelist}"
        if self.time_limit:
            text += f" for {self.time_limit}"
        return clean(text)


def check_gres(gres: str) -> str:
    """``gpu:N`` or ``gpu:TYPE:N``: the only GRES ``--slurm`` asks for."""
    if not _GRES.match(gres):
        raise UsageError(
            f"--gres {gres!r} is not a GPU request: write gpu:N or gpu:TYPE:N (gpu:a100:2)."
        )
    return gres


@frozen
class NodeMeter:
    """How the job's node may measure what it uses: the interpreter and the package of the
    gputop that submits it, where the node has them too (a shared home or software tree),
    and the logs directory its report goes to (docs/slurm.md, "What a Slurm job used")."""

    python: str
    package_dir: str
    """The ``gputop`` package's own directory."""
    logs_dir: str


def node_meter(logs_dir: Path) -> NodeMeter | None:
    """This gputop's own interpreter and package (``None``: not known, nothing to offer)."""
    import gputop

    python = sys.executable
    if not python or not os.path.isabs(python):
        return None
    return NodeMeter(python, str(Path(gputop.__file__).resolve().parent), str(logs_dir))


def batch_script(argv: Sequence[str], meter: NodeMeter | None = None) -> str:
    """The batch script: one ``exec`` of the command, every word quoted by ``shlex``.

    With ``meter``, where the node can start that interpreter the command is ``exec``'d
    through gputop's usage wrapper instead (usage_wrapper.py), which measures the job's
    cards and runs the command in its own place; elsewhere, as without it."""
    lines = [
        "#!/bin/sh",
        "# Written by gputop run --slurm (docs/slurm.md): the command, quoted by shlex.join.",
    ]
    if meter is not None:
        from gputop.core.slurm.usage_wrapper import BOOTSTRAP

        python = shlex.quote(meter.python)
        wrapped = [meter.python, "-E", "-c", BOOTSTRAP, meter.package_dir, meter.logs_dir]
        lines += [
            "# Where this node can start the gputop that submitted the job, its usage wrapper",
            "# measures the job's cards and then runs the command in its own place.",
            f"if {python} -E -c '' </dev/null >/dev/null 2>&1; then",
            f"  exec {shlex.join([*wrapped, *argv])}",
            "fi",
        ]
    lines.append(f"exec {shlex.join(argv)}")
    return "\n".join(lines) + "\n"


def output_path(logs_dir: Path, slurm_job_id: int) -> str:
    return str(logs_dir / OUTPUT_PATTERN.replace("%j", str(slurm_job_id)))


def parse_job_id(stdout: str) -> int:
    """``sbatch --parsable`` prints ``ID`` or ``ID;CLUSTER``."""
    line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    match = _PARSABLE.match(line.strip())
    if match is None:
        raise SlurmError(f"sbatch printed no job id (it printed {line[:80]!r}).")
    job_id = digits_within(match.group(1).lstrip("0") or "0", 1, MAX_JOB_ID)
    if job_id is None:  # 23 digits: an OverflowError in the store; 5,000: in int()
        raise SlurmError(
            f"sbatch printed a job id no Slurm gives ({quoted(clean(match.group(1)))}, not 1 "
            f"to {MAX_JOB_ID}): the job may be queued all the same, unrecorded; squeue --me "
            "lists your jobs, scancel ID cancels one."
        )
    return job_id


def submit(
    request: SlurmRequest,
    state_dir: Path,
    logs_dir: Path,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Submit through ``sbatch``; Slurm's job id, or ``SlurmError`` with Slurm's message."""
    script = _write_script(state_dir, batch_script(request.argv, node_meter(logs_dir)))
    try:
        argv = [
            "sbatch",
            "--parsable",
            *request.sbatch_options(),
            f"--output={logs_dir / OUTPUT_PATTERN}",
            str(script),
        ]
        return parse_job_id(run_slurm(argv, environ).stdout)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(script)


def cancel(slurm_job_id: int, environ: Mapping[str, str] | None = None) -> None:
    """``scancel ID``; ``SlurmError`` with Slurm's message when Slurm refuses."""
    output = run_slurm(["scancel", str(slurm_job_id)], environ)
    if "error" in output.stderr.lower():  # scancel can say so with exit status 0
        raise SlurmError(slurm_message(output.stderr, "scancel refused"))


def _write_script(state_dir: Path, text: str) -> Path:
    name = f"submit-{secrets.token_hex(8)}.sh"
    with private_dir_fd(state_dir) as state_fd:
        scripts_fd = open_private_subdir(state_fd, state_dir, SCRIPTS_DIR)
    try:
        fd = os.open(
            name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            PRIVATE_FILE_MODE | 0o100,
            dir_fd=scripts_fd,
        )
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    finally:
        os.close(scripts_fd)
    return state_dir / SCRIPTS_DIR / name
