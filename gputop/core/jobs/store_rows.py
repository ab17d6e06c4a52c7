"""A job's row in the store, both ways, and the jobs as they are now: what the store's
readers are shown.

One place knows every column (``row_to_job``, ``job_columns``).

Two things can be truer than a row. What a supervisor kept beside the store (pending_end.py:
the store refused it, the disk was full) is what happened to the job: its supervisor, its
start, a stop, its end. An active job whose supervisor is gone is lost. Both are recorded in
the store when it can be written, and otherwise applied to what is returned only, so that
reading never needs writing (docs/faults.md). A file whose supervisor still lives and has
not ended its job is the supervisor's to record (it rewrites the file in place until then):
a reader only applies it.

The store hands itself in as a ``RowStore`` (what this module needs of it), so that the
store imports this module and not the other way round (docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Protocol

from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.jobs.pending_end import (
    MAX_TICKS,
    Kept,
    apply_kept,
    forget_pending_end,
    read_kept,
)
from gputop.core.jobs.usage import (
    JobUsage,
    not_measured_text,
    usage_from_text,
    usage_note_from_text,
)
from gputop.core.numbers import valid_text
from gputop.core.private_files import StoreError
from gputop.core.process_control import from_earlier_boot, process_alive


def text_column(text: str) -> str | bytes:
    """``text`` as the store keeps it: as text where it is valid UTF-8, else as its exact
    bytes (a BLOB). A command line or a path may hold bytes that are not UTF-8, which Python
    keeps as lone surrogates (surrogateescape) and SQLite's text cannot hold: the job must
    still run with those bytes (its argv, its working directory). A surrogate that stands
    for no byte becomes U+FFFD (``valid_text``)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return valid_text(text)
    return text


def column_text(value: str | bytes) -> str:
    """A text column as ``text_column`` wrote it: its bytes back as Python keeps them."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value


def row_to_job(row: sqlite3.Row) -> Job:
    """A job from its row in the store."""
    return Job(
        id=row["id"],
        name=column_text(row["name"]),
        command=tuple(json.loads(row["command"])),
        command_text=column_text(row["command_text"]),
        uses_shell=bool(row["uses_shell"]),
        cwd=column_text(row["cwd"]),
        physical_indices=tuple(json.loads(row["physical_indices"])),
        uuids=tuple(json.loads(row["uuids"])),
        env=json.loads(row["env"]),
        mode=RunMode(row["mode"]),
        state=JobState(row["state"]),
        log_path=column_text(row["log_path"]),
        created_at=row["created_at"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        pid=row["pid"],
        pid_start_time=row["pid_start_time"],
        supervisor_pid=row["supervisor_pid"],
        exit_code=row["exit_code"],
        signal=row["signal"],
        note=row["note"],
        supervisor_start_time=row["supervisor_start_time"],
        host=row["host"],
        grace_s=row["grace_s"],
        wait_for_free=bool(row["wait_for_free"]),
        wait_count=row["wait_count"],
        wait_min_free_mib=row["wait_min_free_mib"],
        wait_max_util_percent=row["wait_max_util_percent"],
        stop_requested=bool(row["stop_requested"]),
        boot_id=row["boot_id"],
        session_id=row["session_id"],
        supervisor_session_id=row["supervisor_session_id"],
        token=row["token"],
        slurm_job_id=row["slurm_job_id"],
        usage=usage_from_text(row["usage"]),
        usage_note=usage_note_from_text(row["usage"]),
        pid_start_ticks=_ticks(_added(row, "pid_start_ticks")),
        supervisor_start_ticks=_ticks(_added(row, "supervisor_start_ticks")),
    )


def _ticks(value: object) -> int | None:
    """A start in ticks as recorded, or ``None`` where it is no count of ticks (a row changed
    by hand: text, a fraction, negative): its process is then proven by its start time, as
    for a row without ticks (one taken as ticks made a running job lost, for good)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TICKS:
        return value
    return None


def _added(row: sqlite3.Row, name: str) -> Any:
    """A column of store_file.ADDED_COLUMNS: NULL where the store has none yet (a store of
    an earlier gputop, opened read-only)."""
    return row[name] if name in row.keys() else None  # noqa: SIM118 (a Row: keys, not values)


def job_columns(job: Job) -> dict[str, Any]:
    """Every column of ``job``'s row, as the store holds it (to record it again)."""
    record = job.to_json()
    return {
        "id": job.id,
        "name": text_column(job.name),
        "command": json.dumps(list(job.command), allow_nan=False),
        "command_text": text_column(job.command_text),
        "uses_shell": int(job.uses_shell),
        "cwd": text_column(job.cwd),
        "physical_indices": json.dumps(list(job.physical_indices), allow_nan=False),
        "uuids": json.dumps(list(job.uuids), allow_nan=False),
        "env": json.dumps(dict(job.env), allow_nan=False),
        "mode": job.mode.value,
        "state": job.state.value,
        "log_path": text_column(job.log_path),
        "created_at": job.created_at,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "pid": job.pid,
        "pid_start_time": job.pid_start_time,
        "supervisor_pid": job.supervisor_pid,
        "supervisor_start_time": job.supervisor_start_time,
        "exit_code": job.exit_code,
        "signal": job.signal,
        "note": record["note"],
        "host": job.host,
        "grace_s": job.grace_s,
        "wait_for_free": int(job.wait_for_free),
        "wait_count": job.wait_count,
        "wait_min_free_mib": job.wait_min_free_mib,
        "wait_max_util_percent": job.wait_max_util_percent,
        "stop_requested": int(job.stop_requested),
        "boot_id": job.boot_id,
        "session_id": job.session_id,
        "supervisor_session_id": job.supervisor_session_id,
        "token": job.token,
        "slurm_job_id": job.slurm_job_id,
        "usage": usage_column(job),
        "pid_start_ticks": job.pid_start_ticks,
        "supervisor_start_ticks": job.supervisor_start_ticks,
    }


def usage_column(job: Job) -> str | None:
    """The ``usage`` column: what the job used, or why that was not measured."""
    if job.usage is not None:
        return job.usage.to_text()
    return not_measured_text(job.usage_note) if job.usage_note else None


# --- the jobs as they are now ---------------------------------------------------------


NEVER_STARTED_AFTER_S = 120.0
"""A job whose supervisor has not reported by then is taken as lost."""


class RowStore(Protocol):
    """What reading jobs as they are now needs of the job store (store.py's ``JobStore``)."""

    in_memory: bool
    state_dir: Path

    @property
    def host(self) -> str: ...

    def reread(self, job_id: int) -> Job: ...

    def mark_supervisor(
        self,
        job_id: int,
        pid: int,
        start_time: float | None,
        session_id: int | None = None,
        start_ticks: int | None = None,
    ) -> None: ...

    def mark_started(
        self,
        job_id: int,
        pid: int,
        pid_start_time: float | None,
        session_id: int | None = None,
        started_at: float | None = None,
        start_ticks: int | None = None,
    ) -> None: ...

    def set_note(self, job_id: int, note: str | None) -> None: ...

    def request_stop(self, job_id: int, grace_s: float | None = None) -> None: ...

    def mark_ended(
        self,
        job_id: int,
        *,
        exit_code: int | None = None,
        signal: int | None = None,
        note: str | None = None,
        stopped: bool | None = None,
        ended_at: float | None = None,
        usage: JobUsage | None = None,
    ) -> None: ...

    def mark_lost(
        self, job_id: int, note: str, supervisor_pid: int | None, found_at: float | None = None
    ) -> bool: ...


def current_jobs(store: RowStore, jobs: list[Job]) -> list[Job]:
    """``jobs`` (rows just read from ``store``) as they are now."""
    return _refresh_liveness(store, _with_kept(store, jobs))


def record_kept(store: RowStore, kept: Kept) -> None:
    """Make in the store the writes ``kept`` holds, in the order they were made. Each is
    the store's own write, made again as often as needed with the same result: a reader
    and the supervisor may both record one file."""
    job_id = kept.job_id
    if kept.supervisor is not None:
        seen = kept.supervisor
        store.mark_supervisor(job_id, seen.pid, seen.start_time, seen.session, seen.start_ticks)
    if kept.started is not None:
        seen = kept.started
        store.mark_started(
            job_id, seen.pid, seen.start_time, seen.session, kept.started_at, seen.start_ticks
        )
    if kept.note is not None:
        store.set_note(job_id, kept.note)
    if kept.stop_requested:
        store.request_stop(job_id)
    end = kept.end
    if end is not None:
        store.mark_ended(
            job_id,
            exit_code=end.exit_code,
            signal=end.signal,
            note=end.note,
            stopped=end.stopped or None,
            ended_at=end.ended_at,
            usage=end.usage,
        )


def _with_kept(store: RowStore, jobs: list[Job]) -> list[Job]:
    if store.in_memory:
        return jobs
    files = read_kept(store.state_dir)
    if not files:
        return jobs
    result = []
    for job in jobs:
        kept = files.get(job.id)
        if kept is None:
            result.append(job)
            continue
        if job.state is JobState.ENDED:  # recorded already (the file is left over)
            forget_pending_end(store.state_dir, job.id)
            result.append(job)
            continue
        seen = apply_kept(job, kept)
        if kept.end is None and _supervisor_may_live(store, seen):
            result.append(seen)  # its supervisor records it (and rewrites it meanwhile)
            continue
        try:
            record_kept(store, kept)
        except StoreError as error:
            if error.fault is None:
                raise
            result.append(seen)
            continue
        forget_pending_end(store.state_dir, job.id)
        result.append(store.reread(job.id))
    return result


def _supervisor_may_live(store: RowStore, job: Job) -> bool:
    """Whether the job's supervisor may still write its file: alive, or on another host
    (a shared state directory), where this reader cannot tell."""
    if job.host != store.host:
        return True
    if job.supervisor_pid is None:
        return False
    if from_earlier_boot(job.boot_id, job.supervisor_start_time or job.created_at):
        return False
    return supervisor_alive(job)


def supervisor_alive(job: Job) -> bool:
    """The job's recorded supervisor is alive and provably the same process."""
    assert job.supervisor_pid is not None
    return process_alive(
        job.supervisor_pid, job.supervisor_start_time, job.supervisor_start_ticks, job.boot_id
    )


def leader_alive(job: Job) -> bool:
    """The job's own process is alive and provably the same process."""
    assert job.pid is not None
    return process_alive(job.pid, job.pid_start_time, job.pid_start_ticks, job.boot_id)


def _refresh_liveness(store: RowStore, jobs: list[Job]) -> list[Job]:
    """Mark lost the active jobs of this host whose supervisor is gone: in the store, or
    (where it cannot be written) in the list returned."""
    result = []
    now = time.time()
    for job in jobs:
        result.append(job)
        if not job.is_active or job.host != store.host or job.slurm_job_id is not None:
            continue  # Slurm's jobs have no supervisor: gputop.core.slurm.sync follows them
        if from_earlier_boot(job.boot_id, job.supervisor_start_time or job.created_at):
            note = (
                "the machine restarted since it was launched: none of its processes is "
                "running, and gputop will never signal its old pids"
            )
        elif job.supervisor_pid is None:
            if now - job.created_at < NEVER_STARTED_AFTER_S:
                continue
            note = "its supervisor never started"
        elif supervisor_alive(job):
            continue
        else:
            note = (
                f"its supervisor (pid {job.supervisor_pid}) ended without recording how the "
                "job ended (killed, or the machine restarted)"
            )
            if job.pid is not None and leader_alive(job):
                # said as of then: the note stays while the process may end at any time
                note += (
                    f"; the job (pid {job.pid}) was still running when this was found "
                    f"(gputop jobs stop {job.id} ends it)"
                )
        try:
            marked = store.mark_lost(job.id, note, job.supervisor_pid, now)
        except StoreError as error:
            if error.fault is None:
                raise
            result[-1] = dataclasses.replace(job, state=JobState.LOST, note=note, ended_at=now)
            continue
        if marked:
            result[-1] = store.reread(job.id)
    return result
