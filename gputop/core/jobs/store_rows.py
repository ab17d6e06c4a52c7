"""A job's record: its row in the store both ways, and every change of it (a transition).

A transition is written as one ``UPDATE`` and applied to a job read, from the same columns,
so what a reader shows of a change not yet recorded (unrecorded.py, or a store that cannot
be written) is what the store will hold. Supervisors and Slurm's rows change jobs by it alone.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from gputop.core.jobs.model import (
    LARGEST_EXIT_CODE,
    LARGEST_SIGNAL,
    NO_EXIT_CODE,
    Job,
    JobState,
    RunMode,
)
from gputop.core.jobs.usage import (
    JobUsage,
    not_measured_text,
    usage_from_text,
    usage_note_from_text,
)
from gputop.core.numbers import LATEST_TIME_S, MAX_PID, valid_text, whole_within, within
from gputop.core.process_control import process_start, session_of
from gputop.core.records import frozen
from gputop.core.safe_text import clean

MAX_TICKS = 2**63 - 1
"""The most clock ticks since boot a start can be (SQLite's integers end here)."""
ACTIVE = (JobState.WAITING, JobState.RUNNING)
NOT_ENDED = (JobState.WAITING, JobState.RUNNING, JobState.LOST)
"""The states a job's end may still be recorded from."""
_ANY = object()


def text_column(text: str) -> str | bytes:
    """``text`` as stored: text where valid UTF-8, else its exact bytes (a BLOB: an argv or a
    path may hold other bytes, and the job must run with them); a lone surrogate: U+FFFD."""
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


_TEXT = ("name", "command_text", "cwd", "log_path")
"""Text that may hold bytes that are not UTF-8 (``text_column``)."""
_LISTS = ("command", "physical_indices", "uuids")
_BOOLS = ("uses_shell", "wait_for_free", "stop_requested")
_TICKS = ("pid_start_ticks", "supervisor_start_ticks")
_CODED = (*_TEXT, *_LISTS, *_BOOLS, *_TICKS, "env", "mode", "state", "usage", "usage_note")
_PLAIN = tuple(f.name for f in dataclasses.fields(Job) if f.name not in _CODED)
"""The fields kept as they are, each in its column of the same name."""


def row_to_job(row: sqlite3.Row | Mapping[str, Any]) -> Job:
    """A job from its row in the store."""
    fields: dict[str, Any] = {name: _plain(name, row[name]) for name in _PLAIN}
    fields.update((name, column_text(row[name])) for name in _TEXT)
    fields.update((name, tuple(json.loads(row[name]))) for name in _LISTS)
    fields.update((name, bool(row[name])) for name in _BOOLS)
    fields.update((name, _ticks(_added(row, name))) for name in _TICKS)
    for name in _PATHS:
        if "\0" in fields[name]:  # no path holds one: open() and chdir() would raise
            raise ValueError(f"its {name} holds a NUL byte")
    return Job(
        **fields,
        env=_environment(json.loads(row["env"])),
        mode=RunMode(row["mode"]),
        state=JobState(row["state"]),
        usage=usage_from_text(row["usage"]),
        usage_note=usage_note_from_text(row["usage"]),
    )


_PATHS = ("cwd", "log_path")
_KINDS = {
    field.name: str(field.type).split(" | ")[0]
    for field in dataclasses.fields(Job)
    if field.name in _PLAIN
}
"""Each plain field's kind (``int``, ``float``, ``str``), from the job's own annotations."""
_LARGEST_INT = 2**63 - 1
"""SQLite's largest integer: an int column holds no other whole number."""


def _plain(name: str, value: object) -> Any:
    """A plain column's value as recorded (NULL stays ``None``); ValueError where a row
    changed by hand holds another kind (a blob, text in a number's column) or a number no
    clock or process can have (``9e999`` in a time): named, never met by a renderer. An exit
    code is only shown: one no exit gives is read as ``NO_EXIT_CODE``, the row kept."""
    kind = _KINDS[name]
    if value is None:
        return None
    if name == "exit_code":  # only shown: another value is an exit not known, not a bad row
        return value if whole_within(value, 0, LARGEST_EXIT_CODE) else NO_EXIT_CODE
    if kind == "str":
        ok = isinstance(value, str)
    elif name in ("pid", "supervisor_pid"):  # 2**40 ended 'jobs stop' in an OverflowError
        ok = whole_within(value, 1, MAX_PID)
    elif name == "signal":  # -1 made 'jobs wait' exit 127 (128 + it), 128 exit 0 (256)
        ok = whole_within(value, 1, LARGEST_SIGNAL)
    elif kind == "int":
        ok = whole_within(value, -_LARGEST_INT, _LARGEST_INT)
    elif name.endswith(("_at", "_time")):
        ok = within(value, 0.0, LATEST_TIME_S)
    else:
        ok = within(value, -LATEST_TIME_S, LATEST_TIME_S)
    if not ok:
        shown = clean(repr(value))[:40]
        raise ValueError(f"its {name} is {shown}, which is no {kind} gputop records there")
    return value


def _environment(value: object) -> dict[str, str]:
    """The variables a job was given, as recorded; ValueError where the row holds another
    value (changed by hand): it is named, never met where a variable's text belongs."""
    if not isinstance(value, dict) or not all(
        isinstance(name, str) and isinstance(text, str) for name, text in value.items()
    ):
        raise ValueError("its env is not an object of texts")
    return value


def _ticks(value: object) -> int | None:
    """A start in ticks as recorded, or ``None`` where it is no count (a row changed by hand):
    its process is then proven by its start time (a bad one made a running job lost)."""
    return value if whole_within(value, 0, MAX_TICKS) else None


def _added(row: sqlite3.Row | Mapping[str, Any], name: str) -> Any:
    """A column of store_file.ADDED_COLUMNS: NULL in an older store opened read-only."""
    return row[name] if name in row.keys() else None  # noqa: SIM118 (a Row: keys, not values)


def job_columns(job: Job) -> dict[str, Any]:
    """Every column of ``job``'s row, as the store holds it (to record it again)."""
    return {
        **{name: getattr(job, name) for name in (*_PLAIN, *_TICKS)},
        **{name: text_column(getattr(job, name)) for name in _TEXT},
        **{name: _json(list(getattr(job, name))) for name in _LISTS},
        **{name: int(getattr(job, name)) for name in _BOOLS},
        "env": _json(dict(job.env)),
        "mode": job.mode.value,
        "state": job.state.value,
        "usage": usage_column(job),
    }


def usage_column(job: Job) -> str | None:
    """The ``usage`` column: what the job used, or why that was not measured."""
    if job.usage is not None:
        return job.usage.to_text()
    return not_measured_text(job.usage_note) if job.usage_note else None


def _json(value: object) -> str:
    return json.dumps(value, allow_nan=False)


def insert_row(
    connection: sqlite3.Connection, columns: Mapping[str, Any], verb: str = "INSERT"
) -> sqlite3.Cursor:
    """Insert a job's row: the column names from code (or a store's own), the values bound."""
    marks = ", ".join("?" for _ in columns)
    return connection.execute(
        f"{verb} INTO jobs ({', '.join(columns)}) VALUES ({marks})", tuple(columns.values())
    )


# --- transitions ------------------------------------------------------------------------


@frozen(slots=False)
class ProcessSeen:
    """A process as the store records it (``start_ticks`` None: unread, or an older record)."""

    pid: int
    start_time: float | None
    session: int | None
    start_ticks: int | None = None

    @classmethod
    def now(cls, pid: int) -> ProcessSeen:
        """``pid`` as it runs now: when it started (a time and in ticks since boot), its session."""
        started = process_start(pid)
        return cls(pid, started.time, session_of(pid), started.ticks)


@frozen(slots=False)
class Transition:
    """``columns`` (stored values) set while the job is in one of ``states`` (``None``: any)."""

    columns: Mapping[str, Any]
    states: tuple[JobState, ...] | None = ACTIVE
    unless_set: frozenset[str] = frozenset()
    """Columns left as they are where already set."""
    supervisor_is: Any = _ANY
    """Only while this is the job's recorded supervisor pid (a job found lost)."""
    kept: Mapping[str, Any] = field(default_factory=dict)
    """The fields of the reserved file's record that hold it (unrecorded.py)."""

    def sql(self, job_id: int) -> tuple[str, tuple[Any, ...]]:
        """The ``UPDATE``: column names from code, every value bound."""
        sets = ", ".join(
            f"{name} = COALESCE({name}, ?)" if name in self.unless_set else f"{name} = ?"
            for name in self.columns
        )
        sql = f"UPDATE jobs SET {sets} WHERE id = ?"
        params: tuple[Any, ...] = (*self.columns.values(), job_id)
        if self.states is not None:
            sql += f" AND state IN ({', '.join('?' for _ in self.states)})"
            params += tuple(state.value for state in self.states)
        if self.supervisor_is is not _ANY:
            sql += " AND supervisor_pid IS ?"
            params += (self.supervisor_is,)
        return sql, params

    def applied(self, job: Job) -> Job:
        """``job`` as the store holds it once this is recorded."""
        if self.states is not None and job.state not in self.states:
            return job
        if self.supervisor_is is not _ANY and job.supervisor_pid != self.supervisor_is:
            return job
        row = job_columns(job)
        for name, value in self.columns.items():
            if name not in self.unless_set or row[name] is None:
                row[name] = value
        return row_to_job(row)


def _note(note: str | None) -> str | None:
    """A note as stored: valid UTF-8 (a path it quotes may hold other bytes, kept as ``\\xNN``)."""
    return None if note is None else valid_text(note)


def supervisor_seen(seen: ProcessSeen) -> Transition:
    """The job's supervisor is ``seen`` (in any state: the launcher records it too)."""
    columns = {
        "supervisor_pid": seen.pid,
        "supervisor_start_time": seen.start_time,
        "supervisor_session_id": seen.session,
        "supervisor_start_ticks": seen.start_ticks,
    }
    return Transition(columns, states=None, kept={"supervisor": seen})


def started(seen: ProcessSeen, at: float | None = None) -> Transition:
    """Running as ``seen``, spawned ``at`` (default now)."""
    at = time.time() if at is None else at
    columns = {
        "state": JobState.RUNNING.value,
        "pid": seen.pid,
        "pid_start_time": seen.start_time,
        "session_id": seen.session,
        "started_at": at,
        "note": None,
        "pid_start_ticks": seen.start_ticks,
    }
    return Transition(columns, kept={"started": seen, "started_at": at})


def note_set(note: str | None) -> Transition:
    return Transition({"note": _note(note)}, kept={"note": note})


def stop_asked(grace_s: float | None = None) -> Transition:
    """A person asked to stop the job (with the grace they gave)."""
    columns: dict[str, Any] = {"stop_requested": 1}
    if grace_s is not None:
        columns["grace_s"] = float(grace_s)
    return Transition(columns, states=NOT_ENDED, kept={"stop_requested": True})


def ended(
    *,
    exit_code: int | None = None,
    signal: int | None = None,
    note: str | None = None,
    stopped: bool | None = None,
    ended_at: float | None = None,
    usage: JobUsage | None = None,
    kept: object = None,
) -> Transition:
    """How the job ended; also ends a lost job (the end is the truth). ``None`` leaves the
    note, usage and ``stopped`` as recorded (a job that ended by itself while a stop was on
    its way did not end because of it); ``kept``: the file's record of it."""
    columns: dict[str, Any] = {
        "state": JobState.ENDED.value,
        "exit_code": exit_code,
        "signal": signal,
        "ended_at": time.time() if ended_at is None else ended_at,
    }
    if note is not None:
        columns["note"] = _note(note)
    if usage is not None:
        columns["usage"] = usage.to_text()
    if stopped is not None:
        columns["stop_requested"] = int(stopped)
    return Transition(columns, states=NOT_ENDED, kept={} if kept is None else {"end": kept})


def lost(note: str, supervisor_pid: int | None, found_at: float | None = None) -> Transition:
    """Lost, unless its supervisor recorded an end (or was replaced) meanwhile; ended when
    found so (the last moment gputop knew of it) until a true end replaces that."""
    columns = {
        "state": JobState.LOST.value,
        "note": _note(note),
        "ended_at": time.time() if found_at is None else found_at,
    }
    return Transition(columns, unless_set=frozenset({"ended_at"}), supervisor_is=supervisor_pid)


def cards_set(
    physical_indices: Sequence[int], uuids: Sequence[str], env: Mapping[str, str]
) -> Transition:
    """The cards an ``--auto`` job waited for, once chosen."""
    return Transition(
        {
            "physical_indices": _json(list(physical_indices)),
            "uuids": _json(list(uuids)),
            "env": _json(dict(env)),
        }
    )


def usage_measured(usage: JobUsage) -> Transition:
    """What the job used so far, as its supervisor measured it (usage_meter.py)."""
    return Transition({"usage": usage.to_text()}, states=NOT_ENDED)


CLAIMED = Transition({"state": JobState.RUNNING.value}, states=(JobState.WAITING,))
"""A waiting job took its cards (JobStore.claim_cards)."""
