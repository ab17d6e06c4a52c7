"""Slurm's queue as ``squeue --json`` reports it: state, reason, user, time left, GPU IDX.

Slurm's JSON changed shape between releases (22.05 gives ``"job_state": "RUNNING"`` and
plain numbers; 23.02+ give lists and ``{"set": true, "number": N}``): both are read. The
GPUs a job holds on a node are the ``IDX`` of its ``gres_detail`` (``gpu:a100:2(IDX:0,2-3)``),
Slurm's physical GPU indices on that node (docs/slurm.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gputop.core.jobs.model import LARGEST_EXIT_CODE, LARGEST_SIGNAL
from gputop.core.numbers import LATEST_TIME_S, digits_within, outside_json, within
from gputop.core.records import frozen
from gputop.core.safe_text import clean
from gputop.core.slurm.commands import SlurmError, run_slurm

_IDX = re.compile(r"\(IDX:([^)]*)\)")
MAX_GPU_INDEX = 4095
"""No machine's card index is larger (as a lab host's, docs/security.md)."""
ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING"})


@frozen
class SlurmJob:
    job_id: int
    name: str
    user: str
    state: str
    """Slurm's state word: PENDING, RUNNING, COMPLETED, CANCELLED, FAILED, TIMEOUT, ..."""
    reason: str
    """Why it is pending (``Resources``, ``Priority``, ...); ``None`` when it is not."""
    partition: str
    nodes: str
    gpu_indices: tuple[int, ...]
    """Physical GPU indices (``IDX``) it holds; on a one-node job, the cards of that node."""
    start_time: float | None
    end_time: float | None
    """When it started; when it ends at the latest (its time limit) or ended."""
    time_limit_minutes: int | None
    """``None``: no limit."""
    exit_code: int | None = None
    signal: int | None = None
    """Set where a signal ended its batch script."""
    gres_detail: tuple[str, ...] = ()
    """Slurm's per-node GRES, one entry per node of ``nodes`` in order (docs/slurm.md)."""
    user_id: int | None = None
    """The uid Slurm runs the job as: what proves a process is the job's (cgroup.py)."""

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    def time_left_s(self, now: float) -> float | None:
        """Seconds until the time limit; ``None`` without a limit or before it starts."""
        if self.state != "RUNNING" or self.time_limit_minutes is None or self.end_time is None:
            return None
        return max(0.0, self.end_time - now)

    @property
    def status_text(self) -> str:
        """``Pending: Resources``, ``Running``, ``Cancelled``: what the jobs table shows
        (cleaned: Slurm's words may carry a user's text)."""
        word = clean(self.state.capitalize())
        if self.state == "PENDING" and self.reason and self.reason != "None":
            return f"{word}: {clean(self.reason)}"
        return word


def parse_gpu_indices(gres_detail: Sequence[str]) -> tuple[int, ...]:
    """``["gpu:a100:2(IDX:0,2-3)"]`` → ``(0, 2, 3)``; ``IDX:N/A`` and junk give nothing."""
    indices: dict[int, None] = {}
    budget = 16 * (MAX_GPU_INDEX + 1)  # indices listed at most: more than Slurm writes
    for entry in gres_detail:
        if not isinstance(entry, str) or not entry.startswith("gpu"):
            continue
        for match in _IDX.finditer(entry):
            for part in match.group(1).split(","):
                first, _, last = part.strip().partition("-")
                start = digits_within(first, 0, MAX_GPU_INDEX)
                end = digits_within(last, 0, MAX_GPU_INDEX) if last else start
                if start is None or end is None or not 0 <= end - start <= 1024:
                    continue  # not ASCII digits of a card (5,000 of them: int() raised)
                budget -= end - start + 1
                if budget < 0:  # 20,000 ranges of 1,025 took seconds
                    return tuple(indices)
                indices.update(dict.fromkeys(range(start, end + 1)))
    return tuple(indices)


MAX_JOB_ID = 2**32 - 1
"""Slurm's job ids are 32-bit."""
MAX_UID = 2**32 - 2
"""(uid_t)-1 is no user."""
TIMES = (0, LATEST_TIME_S)


def _number(value: Any, minimum: float, maximum: float) -> int | None:
    """22.05's plain number, or 23.02+'s ``{"set": bool, "infinite": bool, "number": N}``;
    ``None`` outside ``[minimum, maximum]``: Slurm's JSON is checked where it enters, like a
    host's (docs/security.md), so a time of 10^20 never reaches a clock or the job store."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if within(value, minimum, maximum) else None


def _word(value: Any) -> str:
    if isinstance(value, list):
        value = value[0] if value else ""
    return value if isinstance(value, str) else ""


_SIGNALLED_STATES = frozenset({"CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL"})
WAIT_STATUS_BITS = 16
"""A wait status: the exit code in bits 8..15, the signal in bits 0..6 (bit 7: a core dump);
nothing above. A larger or negative one is no wait's: how the job ended is not known."""


def _exit_code(value: Any, state: str) -> tuple[int | None, int | None]:
    """(exit code, signal): 22.05 gives the batch script's wait status (a job refused
    before it ran has a plain 1), 23.02+ a mapping. An exit code is 0..255 and a signal
    1..127 (in a wait status 1..126: 0x7f is a stopped process's); any other number (300,
    -1, 400 digits, text, an object) is an end not known, never one made up."""
    if isinstance(value, Mapping):  # 23.02+: {"status": [...], "return_code": N, "signal"}
        signal = value.get("signal")
        number = None
        if isinstance(signal, Mapping):
            number = _number(signal.get("id"), 1, LARGEST_SIGNAL)
        return _number(value.get("return_code"), 0, LARGEST_EXIT_CODE), number
    status = _number(value, 0, (1 << WAIT_STATUS_BITS) - 1)
    if status is None:
        return None, None
    if status >= 256 or status == 0:
        return status >> 8, None
    if state in _SIGNALLED_STATES:
        signal = status & 0x7F
        return None, signal if 0 < signal < 0x7F else None
    return status, None


def parse_job(record: Mapping[str, Any]) -> SlurmJob | None:
    """One job of ``squeue --json``; ``None`` for a record without a job id."""
    job_id = _number(record.get("job_id"), 1, MAX_JOB_ID)
    if job_id is None:
        return None
    start = _number(record.get("start_time"), *TIMES)
    end = _number(record.get("end_time"), *TIMES)
    gres = record.get("gres_detail") or []
    state = _word(record.get("job_state")).upper()
    exit_code, signal = _exit_code(record.get("exit_code"), state)
    return SlurmJob(
        job_id=job_id,
        name=_word(record.get("name")),
        user=_word(record.get("user_name")),
        state=state,
        reason=_word(record.get("state_reason")),
        partition=_word(record.get("partition")),
        nodes=_word(record.get("nodes")),
        gpu_indices=parse_gpu_indices(gres if isinstance(gres, list) else []),
        start_time=float(start) if start else None,
        end_time=float(end) if end else None,
        time_limit_minutes=_number(record.get("time_limit"), 0, 2**32 - 1),
        exit_code=exit_code,
        signal=signal,
        gres_detail=tuple(entry for entry in gres if isinstance(entry, str))
        if isinstance(gres, list)
        else (),
        user_id=_number(record.get("user_id"), 0, MAX_UID),
    )


def _error_text(error: Any) -> str:
    """``Failed while looking for jobs (Unspecified error)``: Slurm's words, cleaned."""
    if not isinstance(error, Mapping):
        return clean(str(error))[:200]
    words = [_word(error.get(key)) for key in ("description", "error")]
    described, named = (clean(word)[:200] for word in words)
    return f"{described} ({named})" if described and named else described or named or "error"


def parse_queue(text: str) -> list[SlurmJob]:
    """``squeue --json``'s output → its jobs; ``SlurmError`` for output that is not JSON."""
    try:
        document = outside_json(text)
    except ValueError:  # nested too deeply too
        raise SlurmError("squeue --json printed something that is not JSON.") from None
    errors = document.get("errors") if isinstance(document, Mapping) else None
    if errors:  # Slurm 22.05 exits 0 when it could not reach the controller
        raise SlurmError("squeue: " + "; ".join(_error_text(error) for error in errors[:3]))
    records = document.get("jobs") if isinstance(document, Mapping) else None
    if not isinstance(records, list):
        raise SlurmError("squeue --json printed no list of jobs.")
    jobs = [parse_job(record) for record in records if isinstance(record, Mapping)]
    return [job for job in jobs if job is not None]


def read_queue(
    environ: Mapping[str, str] | None = None,
    *,
    job_ids: Sequence[int] = (),
    user: str | None = None,
) -> list[SlurmJob]:
    """The jobs Slurm knows (ended ones too, for ``MinJobAge``), optionally only some.

    The filter is applied here: Slurm 22.05's ``squeue --json`` ignores ``--jobs`` and
    ``--user`` and prints every job.
    """
    jobs = parse_queue(run_slurm(["squeue", "--json", "--states=all"], environ).stdout)
    wanted = set(job_ids)
    return [
        job
        for job in jobs
        if (not wanted or job.job_id in wanted) and (user is None or job.user == user)
    ]
