"""Running Slurm's commands: argv lists only, a time limit, and Slurm's own words on failure.

Every Slurm command reads ``SLURM_CONF`` (and the rest of the environment) as the person
running gputop has it, so gputop talks to the cluster their ``sbatch`` talks to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from gputop.core.errors import GputopError
from gputop.core.records import frozen
from gputop.core.safe_text import clean

COMMAND_TIMEOUT_S = 20.0
"""Slurm's clients retry an unreachable controller for a while; past this gputop gives up."""


class SlurmError(GputopError):
    """A Slurm command failed; the message is Slurm's own (cleaned for the terminal)."""


@frozen
class SlurmOutput:
    stdout: str
    stderr: str


def slurm_message(stderr: str, fallback: str) -> str:
    """Slurm's error lines, joined: ``sbatch: error: invalid partition specified: x``."""
    lines = [clean(line.strip()) for line in stderr.splitlines() if line.strip()]
    return " ".join(lines[-3:]) if lines else fallback


def run_slurm(
    argv: Sequence[str],
    environ: Mapping[str, str] | None = None,
    timeout_s: float = COMMAND_TIMEOUT_S,
) -> SlurmOutput:
    """Run one Slurm command; ``SlurmError`` with Slurm's message when it fails."""
    env = dict(os.environ if environ is None else environ)
    program = shutil.which(argv[0], path=env.get("PATH"))
    if program is None:
        raise SlurmError(f"{argv[0]} was not found on PATH: is Slurm installed here?")
    try:
        result = subprocess.run(
            [program, *argv[1:]],
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"{argv[0]} did not answer within {timeout_s:g} s: is the Slurm controller up?"
        ) from None
    except OSError as error:
        raise SlurmError(f"Cannot run {argv[0]}: {error.strerror or error}.") from None
    if result.returncode != 0:
        raise SlurmError(
            slurm_message(result.stderr, f"{argv[0]} failed with exit code {result.returncode}")
        )
    return SlurmOutput(result.stdout, result.stderr)
