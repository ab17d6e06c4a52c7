"""Word when a job ends or a waiting job starts: a toast, a terminal notification, a hook.

The person's ``--notify-command`` runs as an argv with the job's facts in ``GPUTOP_*``
variables, never spliced into a command line; job names come from outside, so every text is
cleaned and stripped of what would end an OSC string (docs/notifications.md).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
from collections.abc import Callable, Collection, Mapping, Sequence

from gputop.core.errors import UsageError
from gputop.core.jobs.model import Job, JobState, signal_name
from gputop.core.jobs.xid_marks import JobXids, xids_text
from gputop.core.records import frozen
from gputop.core.safe_text import clean
from gputop.core.units import duration, human_bytes

STARTED = "started"
ENDED = "ended"
NOTIFY_TIMEOUT_S = 30.0
_OSC_TEXT_MAX = 200
NOTE_MAX = 160
"""The most of a job's note an end word carries (the log has the rest)."""
VARIABLES_HELP = (
    "GPUTOP_EVENT, GPUTOP_JOB_ID, GPUTOP_JOB_STATUS and more in its environment "
    "(docs/notifications.md)"
)
"""How ``--notify-command``'s help names what the command gets (``event_environment``)."""
_OSC9_TERMINALS = ("iTerm.app", "WezTerm", "ghostty")
"""``TERM_PROGRAM`` values of terminals that show OSC 9 as a desktop notification."""


@frozen(slots=False)
class JobEvent:
    """One job started (after waiting) or ended, with what a person wants to know."""

    kind: str
    job: Job
    peak_memory_bytes: int | None = None
    """The most GPU memory its processes held together, where a dashboard saw it."""
    xids: JobXids = ()

    @property
    def text(self) -> str:
        """``Job 3 (train.py) exited 0 after 1h02m07s, peak 31.2G GPU memory``, and why where its
        supervisor said (``: x: command not found``), cleaned."""
        job = self.job
        name = clean(job.name)
        if self.kind == STARTED:
            return f"Job {job.id} ({name}) started on GPU {clean(job.gpus_text)}."
        took = job.duration_s()
        after = f" after {duration(took)}" if took is not None else ""
        peak = self.peak_memory_bytes
        most = f", peak {human_bytes(peak)} GPU memory" if peak else ""
        cards = f"; its GPUs had {xids_text(self.xids)} while it ran" if self.xids else ""
        why = end_note(job)
        return f"Job {job.id} ({name}) {clean(job.status_text)}{after}{most}{cards}{why}."

    @property
    def failed(self) -> bool:
        return self.kind == ENDED and self.job.status != "exited"


def end_note(job: Job) -> str:
    """``": X: command not found"``: why an ended job ended so, cleaned and cut; ``""`` where
    nothing was said or the note is its status (a Slurm job's)."""
    note = (job.note or "").strip()
    if job.is_active or not note or note == job.status_text:
        return ""
    note = clean(note)
    if len(note) > NOTE_MAX:
        note = note[: NOTE_MAX - 1].rstrip() + "…"
    return f": {note}"


def job_events(
    before: Sequence[Job],
    after: Sequence[Job],
    peaks: Mapping[int, int] | None = None,
    launched: Collection[int] = (),
    xids: Callable[[Job], JobXids] | None = None,
) -> list[JobEvent]:
    """Jobs that ended and waiting jobs that started between two reads. A job first seen
    ended is no news unless this reader ``launched`` it; nor is the start of one it launched
    unqueued (its launch said it). ``peaks``: the dashboard's most GPU memory per job;
    ``xids``: asked of each job that ended."""
    earlier = {job.id: job for job in before}
    events: list[JobEvent] = []
    for job in after:
        was = earlier.get(job.id)
        if not job.is_active and (job.id in launched if was is None else was.is_active):
            peak = (peaks or {}).get(job.id)
            events.append(JobEvent(ENDED, job, peak, xids(job) if xids is not None else ()))
        elif was is not None and was.state is JobState.WAITING and job.state is JobState.RUNNING:
            if job.id in launched and not job.wait_for_free:
                continue  # started as launched: the launcher said so ("launched on GPU 1")
            events.append(JobEvent(STARTED, job))
    return events


def exit_status(job: Job) -> int:
    """The job's status as a shell gives it: its exit code, 128 + signal, or 1 if unknown."""
    if job.signal is not None:
        return 128 + job.signal
    if job.known_exit_code is not None:
        return job.known_exit_code
    return 0 if job.status == "exited" else 1


def event_environment(event: JobEvent) -> dict[str, str]:
    """The ``GPUTOP_*`` variables a notify command gets (docs/notifications.md)."""
    job = event.job
    took = job.duration_s()
    values = {
        "GPUTOP_EVENT": event.kind,
        "GPUTOP_JOB_ID": str(job.id),
        "GPUTOP_JOB_NAME": job.name,
        "GPUTOP_JOB_STATUS": job.status,
        "GPUTOP_JOB_STATUS_TEXT": job.status_text,
        "GPUTOP_JOB_GPUS": job.gpus_text,
        "GPUTOP_JOB_EXIT_CODE": "" if job.known_exit_code is None else str(job.known_exit_code),
        "GPUTOP_JOB_SIGNAL": "" if job.signal is None else signal_name(job.signal),
        "GPUTOP_JOB_DURATION_S": "" if took is None else f"{took:.0f}",
        "GPUTOP_JOB_LOG": job.log_path,
        "GPUTOP_JOB_PEAK_MEMORY_BYTES": ""
        if event.peak_memory_bytes is None
        else str(event.peak_memory_bytes),
        "GPUTOP_JOB_XIDS": ",".join(f"{code}:{count}" for code, count in event.xids),
        "GPUTOP_MESSAGE": event.text,
    }
    # A NUL cannot be in an environment variable: it would end the value early.
    return {key: value.replace("\0", "") for key, value in values.items()}


def notify_argv(command: str) -> list[str]:
    """The person's own notify command as an argv (split once, never run by a shell)."""
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise UsageError(f"Cannot read the notify command {command!r}: {error}.") from None
    if not argv:
        raise UsageError("The notify command is empty: give a program to run.")
    return argv


def run_notify_command(
    argv: Sequence[str], event: JobEvent, environ: Mapping[str, str] = os.environ
) -> str | None:
    """Run the notify command for ``event``; what went wrong, for a person, or None."""
    env = {**environ, **event_environment(event)}
    try:
        finished = subprocess.run(
            list(argv),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=NOTIFY_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"the notify command ran past {NOTIFY_TIMEOUT_S:g} s and was stopped"
    except OSError as error:
        return f"the notify command could not run: {error.strerror or error}"
    if finished.returncode != 0:
        return f"the notify command exited with {finished.returncode}"
    return None


def terminal_notification(title: str, body: str, environ: Mapping[str, str]) -> bytes:
    """The bytes that make this terminal show a notification: OSC 777 (VTE, foot), OSC 9
    (iTerm2, WezTerm, ghostty, Windows Terminal), else the bell; inside tmux wrapped in its
    passthrough, which tmux 3.3+ forwards with ``allow-passthrough`` on."""
    safe_title, safe_body = _osc_text(title), _osc_text(body)
    term = environ.get("TERM", "")
    if environ.get("VTE_VERSION") or term.startswith("foot"):
        sequence = f"\x1b]777;notify;{safe_title};{safe_body}\x07".encode()
    elif environ.get("TERM_PROGRAM") in _OSC9_TERMINALS or environ.get("WT_SESSION"):
        sequence = f"\x1b]9;{safe_title}: {safe_body}\x07".encode()
    else:
        return b"\x07"
    if environ.get("TMUX"):
        return b"\x1bPtmux;" + sequence.replace(b"\x1b", b"\x1b\x1b") + b"\x1b\\"
    return sequence


def write_terminal_notification(event: JobEvent, environ: Mapping[str, str]) -> bool:
    """To the controlling terminal, where there is one; False where there is none."""
    data = terminal_notification("gputop", event.text, environ)
    try:
        fd = os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return True
    return False


def _osc_text(text: str) -> str:
    """Cleaned, no ``;`` (OSC 777's separator), short enough for any OSC buffer."""
    cleaned = clean(text).replace(";", ",")
    return cleaned[:_OSC_TEXT_MAX]
