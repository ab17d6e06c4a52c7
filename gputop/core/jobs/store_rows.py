"""A job and its row in the store, both ways: one place that knows every column."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.jobs.usage import not_measured_text, usage_from_text, usage_note_from_text
from gputop.core.numbers import valid_text


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
    )


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
    }


def usage_column(job: Job) -> str | None:
    """The ``usage`` column: what the job used, or why that was not measured."""
    if job.usage is not None:
        return job.usage.to_text()
    return not_measured_text(job.usage_note) if job.usage_note else None
