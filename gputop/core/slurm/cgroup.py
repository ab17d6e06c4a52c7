"""Which Slurm job a process belongs to, where that can be proven (docs/slurm.md,
docs/security.md "Slurm job attribution").

Two signals name a job, and a user can forge both: ``SLURM_JOB_ID`` in a process's
environment (its owner sets it), and a ``job_N`` in its ``/proc/PID/cgroup`` path (on
cgroup v2 a user may make cgroups of any name in their own delegated subtree, under
``user@UID.service``, and move their processes there). So a process is in Slurm job N only
when one of these holds:

1. Its cgroup is in Slurm's own hierarchy, which only slurmd (root) creates, anchored at the
   hierarchy's root: ``0::/system.slice/slurmstepd.scope/job_N/...`` (cgroup v2, the
   ``slurmstepd.scope`` systemd gives slurmd), or ``N:controller:/slurm/uid_U/job_N/...``
   (cgroup v1) where U is the process's owner and, where Slurm reports job N's user, that
   user too (v1 may hand ``uid_U`` to user U, who could then make any ``job_M`` in it).
2. Otherwise (``job_N`` elsewhere in the path, or ``SLURM_JOB_ID=N``): the process's owner,
   the real uid of ``/proc/PID/status`` (which the process cannot change), is job N's user
   as Slurm reports it (``job_users``: squeue's ``user_id``). Where Slurm's user for N is
   not known the claim is not taken.

A process whose claim does not hold is in no job. A user can thus at most tie their own
processes to their own jobs. ``SLURM_JOB_ID`` is readable by the process's owner and root
(sampling/process_env.py); for other users' processes it stays unknown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from gputop.core.numbers import parse_id
from gputop.core.sampling.process_env import read_environ

_JOB_IN_PATH = re.compile(r"/job_([0-9]{1,18})(?:/|$)")
_SLURM_V2 = re.compile(r"/system\.slice/slurmstepd\.scope/job_([0-9]{1,18})(?:/|$)")
_SLURM_V1 = re.compile(r"/slurm/uid_([0-9]{1,18})/job_([0-9]{1,18})(?:/|$)")
ENVIRON_LIMIT_BYTES = 1 << 20


def job_in_cgroup(cgroup_text: str) -> int | None:
    """The Slurm job id named anywhere in a ``/proc/PID/cgroup`` text, if any: a claim,
    proven only as ``attributed_job`` says."""
    for line in cgroup_text.splitlines():
        match = _JOB_IN_PATH.search(line.split(":", 2)[-1])
        if match:
            return int(match.group(1))
    return None


def slurm_hierarchy_job(cgroup_text: str, owner: int) -> tuple[int, bool] | None:
    """(job id, whether Slurm's user for it must be checked too) from a path in Slurm's own
    hierarchy (rule 1 above), anchored at the root; ``None`` for any other path."""
    for line in cgroup_text.splitlines():
        path = line.split(":", 2)[-1]
        v2 = _SLURM_V2.match(path) if line.startswith("0::") else None
        if v2:
            return int(v2.group(1)), False
        v1 = _SLURM_V1.match(path)
        if v1 and int(v1.group(1)) == owner:
            return int(v1.group(2)), True
    return None


def job_in_environ(environ_bytes: bytes) -> int | None:
    """``SLURM_JOB_ID`` from a process's environment (NUL-separated), if any: a claim."""
    for entry in environ_bytes.split(b"\0"):
        name, _, value = entry.partition(b"=")
        if name in (b"SLURM_JOB_ID", b"SLURM_JOBID"):
            found = parse_id(value.decode("ascii", "replace"))
            if found is not None:
                return found
    return None


def real_uid(directory: Path) -> int | None:
    """The real uid of a ``/proc/PID`` directory's process (``Uid:`` of its status)."""
    try:
        status = (directory / "status").read_text(errors="replace")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            return parse_id(fields[1]) if len(fields) > 1 else None
    return None


def attributed_job(
    directory: Path,
    job_users: Mapping[int, int],
    environ: bytes | None = None,
    cgroup_text: str | None = None,
) -> int | None:
    """The Slurm job of one ``/proc/PID`` directory by the rules above; ``None`` where
    none is proven. ``environ`` and ``cgroup_text``: already read, where a caller has."""
    owner = real_uid(directory)
    if owner is None:
        return None
    if cgroup_text is None:
        try:
            cgroup_text = (directory / "cgroup").read_text(errors="replace")
        except OSError:
            return None
    slurms = slurm_hierarchy_job(cgroup_text, owner)
    if slurms is not None:
        job_id, check_user = slurms
        if not check_user or job_users.get(job_id, owner) == owner:
            return job_id
        return None
    claimed = job_in_cgroup(cgroup_text)
    if claimed is None:
        if environ is None:
            environ = read_environ(directory, ENVIRON_LIMIT_BYTES)
        claimed = None if environ is None else job_in_environ(environ)
    if claimed is not None and job_users.get(claimed) == owner:
        return claimed
    return None


def slurm_job_of_pid(
    pid: int, job_users: Mapping[int, int], proc: Path = Path("/proc")
) -> int | None:
    """The Slurm job of process ``pid``, where proven (``attributed_job``)."""
    return attributed_job(proc / str(pid), job_users)
