"""One launched job as gputop records it: what was asked, on which cards, and how it ended.

Its state moves one way: waiting -> running -> ended, or lost when its supervisor vanished
without recording an end. The status a person reads ("failed 3") is derived from how it
ended, never stored, so the two cannot disagree.
"""

from __future__ import annotations

import enum
import signal as signal_module
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gputop.core import settings
from gputop.core.errors import UsageError
from gputop.core.records import frozen

if TYPE_CHECKING:
    from gputop.core.jobs.usage import JobUsage

DEFAULT_GRACE_S = 10.0
"""Seconds between SIGTERM and SIGKILL when a job is stopped."""
MAX_GRACE_S = 24 * 3600.0


def checked_grace(grace_s: float) -> float:
    """A grace period given by a person, refused out of range."""
    if not 0 <= grace_s <= MAX_GRACE_S:
        raise UsageError(f"The grace period must be between 0 and 86400 seconds, not {grace_s}.")
    return float(grace_s)


JOB_ID_ENV = settings.JOB_ID.name
"""Set in every launched job's environment to its id (process_jobs.py reads it back)."""
JOB_TOKEN_ENV = settings.JOB_TOKEN.name
"""Set to the job's ``token``: proves a left-over process is the job's (stop.py)."""
LOG_CUT_NOTE = "log cut"
"""How the note of a job whose log was cut begins (logs.py, LogCap)."""


class JobState(str, enum.Enum):
    WAITING = "waiting"
    """Recorded; waiting for its cards to be free, or for its supervisor to start it."""
    RUNNING = "running"
    ENDED = "ended"
    LOST = "lost"
    """Its supervisor is gone and never recorded an end."""


class RunMode(str, enum.Enum):
    DETACHED = "detached"
    """Its own session, no terminal, output to the log: survives logout (SIGHUP)."""
    TMUX = "tmux"
    """In a new tmux window, on a pseudo-terminal, output copied to the log."""


LARGEST_SIGNAL = 127
"""The largest signal a job's end records: 128 + it is still a shell's status (no OS has more:
Linux ends at 64, FreeBSD at 128, whose 256 a shell would read as 0)."""


LARGEST_EXIT_CODE = 255
"""An exit code is 0..255 (a signal is recorded apart). A job's ``exit_code`` may hold
another (a row changed by hand, an older gputop's record of Slurm's return code): an exit
not known, shown ``exit ?``, ``null`` in JSON, never a shell's status."""
NO_EXIT_CODE = -1
"""``exit_code`` read from a row holding no exit code (300, text, a float)."""


def signal_name(number: int) -> str:
    """``SIGTERM`` for 15; ``signal 64`` for numbers Python has no name for."""
    try:
        return signal_module.Signals(number).name
    except ValueError:
        return f"signal {number}"


@frozen(kw_only=True)
class Job:
    """A job as recorded; a launch's ``Job`` (``JobStore.create_job``) is what was asked,
    before the store gives it an id, its log, its state and what proves its processes."""

    id: int = 0
    name: str
    command: tuple[str, ...]
    """The argv exactly as exec'd; for a shell job ``(shell, "-c", text)``."""
    command_text: str
    """What the user typed (or ``shlex.join`` of the argv): for display and history."""
    uses_shell: bool
    cwd: str
    physical_indices: tuple[int, ...]
    """In cuda order: ``physical_indices[N]`` is ``cuda:N``. Empty while an ``--auto``
    job waits for its cards to be chosen."""
    uuids: tuple[str, ...]
    """Same order as ``physical_indices``."""
    env: Mapping[str, str]
    """The pinning variables only: CUDA_DEVICE_ORDER and CUDA_VISIBLE_DEVICES."""
    mode: RunMode = RunMode.DETACHED
    state: JobState = JobState.WAITING
    log_path: str = ""
    created_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    pid: int | None = None
    """The job's own process: leader of its process group and session."""
    pid_start_time: float | None = None
    supervisor_pid: int | None = None
    exit_code: int | None = None
    """Set when the job exited by itself (``exit(3)`` -> 3)."""
    signal: int | None = None
    """Set when a signal ended the job."""
    note: str | None = None
    """For a person: why it is waiting, why it failed to start, why it was lost."""
    supervisor_start_time: float | None = None
    host: str = ""
    """The machine the job runs on: a store on a shared home directory is seen from many."""
    grace_s: float = DEFAULT_GRACE_S
    wait_for_free: bool = False
    """Start only once the cards are free by the policy (``--wait``)."""
    wait_count: int | None = None
    """``--auto N --wait``: choose N free cards once that many are free."""
    wait_min_free_mib: int | None = None
    wait_max_util_percent: int | None = None
    stop_requested: bool = False
    """A person asked to stop it: however it then ended, its status is "killed"."""
    # What proves a pid still names this job's process (docs/security.md, part two):
    boot_id: str | None = None
    """The boot the job was recorded in; a job of an earlier boot is never signalled."""
    session_id: int | None = None
    """The job's session (it leads its own): every process it starts shares it."""
    supervisor_session_id: int | None = None
    token: str | None = None
    """A random value in the job's environment (``JOB_TOKEN_ENV``): proves a process left
    over from a lost job is its."""
    slurm_job_id: int | None = None
    """A job submitted through ``sbatch``: Slurm runs it; its state follows Slurm's."""
    usage: JobUsage | None = None
    """What it used as its supervisor measured it (usage.py); ``None``: not measured."""
    usage_note: str | None = None
    """Why ``usage`` is ``None``, where known (a Slurm job's node could not measure it)."""
    pid_start_ticks: int | None = None
    """When ``pid`` started, in clock ticks since boot: with ``boot_id``, proves the pid is
    the job's whatever the wall clock did (``None``: an older record; its start time is
    compared)."""
    supervisor_start_ticks: int | None = None

    @property
    def log_cut(self) -> bool:
        """Its log was cut at its size cap or a floor of free space (docs/faults.md)."""
        return bool(self.note and self.note.startswith(LOG_CUT_NOTE))

    @property
    def is_active(self) -> bool:
        return self.state in (JobState.WAITING, JobState.RUNNING)

    @property
    def status(self) -> str:
        """waiting | running | lost (the state's names) | exited | failed | killed."""
        if self.state is not JobState.ENDED:
            return self.state.value
        if self.signal is not None or self.stop_requested:
            return "killed"
        return "exited" if self.exit_code == 0 else "failed"

    @property
    def known_exit_code(self) -> int | None:
        """``exit_code`` where it is one an exit gives (``LARGEST_EXIT_CODE``)."""
        code = self.exit_code
        return code if code is not None and 0 <= code <= LARGEST_EXIT_CODE else None

    @property
    def status_text(self) -> str:
        """The jobs table's status column: "exited 0", "failed 3", "killed (SIGTERM)";
        for a Slurm job, Slurm's words ("Pending: Resources", "Cancelled")."""
        if self.slurm_job_id is not None and self.state is not JobState.LOST and self.note:
            return self.note
        status = self.status
        if status == "exited":
            return "exited 0"
        known = self.known_exit_code
        if status == "failed":
            if self.exit_code is None:
                return "failed"
            return "failed (exit ?)" if known is None else f"failed {known}"
        if status == "killed":
            if self.signal is not None:
                return f"killed ({signal_name(self.signal)})"
            if self.started_at is None:
                return "killed (never started)"
            if self.exit_code is not None:
                return f"killed (exit {'?' if known is None else known})"
            return "killed"
        return status

    @property
    def waiting_reason(self) -> str:
        """Why a waiting job has not started, for a person: the supervisor's note where it
        wrote one (which cards are busy, and with what), else what it waits for."""
        if self.note:
            return self.note
        if self.wait_count is not None:
            return f"for {self.wait_count} free GPU" + ("" if self.wait_count == 1 else "s")
        if self.wait_for_free:
            return "for its GPUs to be free"
        return "starting (its supervisor has not started it yet)"

    def duration_s(self, now: float | None = None) -> float | None:
        """Run time so far (running) or in all (ended); ``None`` before it started, and for a
        job lost without ``ended_at`` (an older record): its end is not known, never grows."""
        if self.started_at is None or (self.ended_at is None and self.state is JobState.LOST):
            return None
        end = self.ended_at
        if end is None:
            end = time.time() if now is None else now
        return max(0.0, end - self.started_at)

    @property
    def gpus_text(self) -> str:
        """``3,1`` in cuda order, or what a waiting ``--auto`` job is waiting for."""
        if self.physical_indices:
            return ",".join(str(i) for i in self.physical_indices)
        if self.wait_count is not None:
            return f"any {self.wait_count}"
        return "-"

    def to_json(self) -> dict[str, Any]:
        """The ``gputop jobs --json`` record. Fields are only ever added."""
        record = {name: getattr(self, name, None) for name in _JSON_FIELDS}
        record.update(
            exit_code=self.known_exit_code,
            command=list(self.command),
            gpus=list(self.physical_indices),
            uuids=list(self.uuids),
            env=dict(self.env),
            mode=self.mode.value,
            usage=self.usage.to_json() if self.usage is not None else None,
        )
        return record


_JSON_FIELDS = (
    "id", "name", "command", "command_text", "uses_shell", "cwd", "gpus", "uuids", "env",
    "status", "status_text", "exit_code", "signal", "pid", "log_path", "created_at",
    "started_at", "ended_at", "mode", "host", "note", "slurm_job_id", "usage", "usage_note",
)  # fmt: skip
