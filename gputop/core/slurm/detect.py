"""Is Slurm here? Its commands on PATH, or ``SLURM_*`` in the environment (an allocation)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

ALLOCATION_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOBID")


def slurm_commands_here(environ: Mapping[str, str] | None = None) -> bool:
    """``squeue`` is on PATH: this machine can ask a Slurm controller about its jobs."""
    env = os.environ if environ is None else environ
    return shutil.which("squeue", path=env.get("PATH", "")) is not None


def inside_allocation(environ: Mapping[str, str] | None = None) -> bool:
    """This process runs inside a Slurm job (``SLURM_JOB_ID`` is set)."""
    env = os.environ if environ is None else environ
    return any(env.get(name) for name in ALLOCATION_VARIABLES)


def slurm_detected(environ: Mapping[str, str] | None = None) -> bool:
    return slurm_commands_here(environ) or inside_allocation(environ)
