"""Is Slurm here? Its commands on PATH, or ``SLURM_*`` in the environment (an allocation)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence

ALLOCATION_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOBID")
CONFIG_PLACES = (
    "/etc/slurm/slurm.conf",
    "/run/slurm/conf/slurm.conf",
    "/etc/slurm-llnl/slurm.conf",
)
"""Where Slurm's commands find the cluster without ``SLURM_CONF`` (``/run/slurm/conf``:
the cache of a configless node)."""


def slurm_commands_here(
    environ: Mapping[str, str] | None = None, config_places: Sequence[str] = CONFIG_PLACES
) -> bool:
    """``squeue`` is on PATH and knows a cluster: this machine can ask Slurm about jobs.

    A client installed without any configuration (a laptop with the package) is no Slurm:
    asking it would only fail every few seconds.
    """
    env = os.environ if environ is None else environ
    if shutil.which("squeue", path=env.get("PATH", "")) is None:
        return False
    if env.get("SLURM_CONF") or inside_allocation(env):
        return True
    return any(os.path.isfile(place) for place in config_places)


def inside_allocation(environ: Mapping[str, str] | None = None) -> bool:
    """This process runs inside a Slurm job (``SLURM_JOB_ID`` is set)."""
    env = os.environ if environ is None else environ
    return any(env.get(name) for name in ALLOCATION_VARIABLES)
