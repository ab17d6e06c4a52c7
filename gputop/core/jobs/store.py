"""The job store: one private SQLite file per user, shared by every gputop and supervisor.

Private (0700, 0600): commands and paths say what a person works on. A damaged file is moved
aside, never deleted; a newer gputop's is refused as it is (store_file.py). A job's row
changes only by the transitions of store_rows.py (``record``).

Readers are shown the jobs as they are now, for two things are truer than a row: what a
supervisor kept in its reserved file (unrecorded.py), and that an active job whose
supervisor is gone is lost. Both are recorded where the store can be written, else applied
to what is returned, so reading never needs writing.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from dataclasses import replace
from typing import Any

from gputop.core.errors import GputopError
from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.store_connection import StoreConnection
from gputop.core.jobs.store_file import REBUILT_NOTE, StoreError, default_state_dir
from gputop.core.jobs.store_rows import (
    CLAIMED,
    Transition,
    column_text,
    insert_row,
    job_columns,
    lost,
    row_to_job,
    text_column,
)
from gputop.core.jobs.unrecorded import Unrecorded, forget_unrecorded, read_unrecorded
from gputop.core.private_files import STATE_DIR_ENV, open_log_append
from gputop.core.process_control import current_boot_id, from_earlier_boot, process_alive
from gputop.core.safe_text import clean

__all__ = ["NEVER_STARTED_AFTER_S", "JobNotFound", "JobStore", "StoreError", "default_state_dir"]

HISTORY_KEPT = 1000
NEVER_STARTED_AFTER_S = 120.0
"""A job whose supervisor has not reported by then is taken as lost."""


class JobNotFound(GputopError):
    """No job has that id."""


class JobStore(StoreConnection):
    """Read and record jobs (one per process and state directory: ``open``)."""

    # --- reading -------------------------------------------------------------------------

    def list_jobs(self) -> list[Job]:
        """Every job, oldest first; jobs whose supervisor vanished are marked lost first."""
        return current_jobs(self, self._select("SELECT * FROM jobs ORDER BY id"))

    def active_jobs(self) -> list[Job]:
        """Waiting or running jobs, oldest first."""
        return [job for job in self.list_jobs() if job.is_active]

    def get(self, job_id: int) -> Job:
        jobs = self._select("SELECT * FROM jobs WHERE id = ?", (job_id,))
        if not jobs:
            raise JobNotFound(f"There is no job {job_id}; `gputop jobs` lists them.")
        return current_jobs(self, jobs)[0]

    def reread(self, job_id: int) -> Job:
        """The job's row as the store holds it now, nothing applied."""
        return self._select("SELECT * FROM jobs WHERE id = ?", (job_id,))[0]

    def history(self, limit: int = 200) -> list[str]:
        """Commands launched before, oldest first and newest last, each once."""
        rows = self._rows("SELECT command_text FROM history ORDER BY seq DESC LIMIT ?", (limit,))
        return [column_text(row[0]) for row in reversed(rows)]

    # --- writing -------------------------------------------------------------------------

    def create_job(self, asked: Job) -> Job:
        """Record ``asked`` (a launch: ``Job``'s defaults stand for what the store sets) as a
        new waiting job of this host, and create its (empty, private) log."""
        job = replace(
            asked,
            state=JobState.WAITING,
            created_at=time.time(),
            host=self.host,
            boot_id=current_boot_id(),
            token=secrets.token_hex(16),
        )
        with self._writing() as conn:
            job_id = _insert_new(conn, job)
            log_path = self.logs_dir / f"{job_id}.log"
            try:
                os.close(open_log_append(log_path))
            except OSError as error:
                raise StoreError(
                    f"Cannot create the job log {log_path}: {error.strerror or error}."
                ) from None
            conn.execute(
                "UPDATE jobs SET log_path = ? WHERE id = ?", (text_column(str(log_path)), job_id)
            )
        return self.get(job_id)

    def insert_job(self, job: Job) -> Job:
        """Record ``job`` as it is, under a new id: a job that runs outside gputop's
        supervisors (slurm/job_rows.py)."""
        with self._writing() as conn:
            job_id = _insert_new(conn, job)
        return self.get(job_id)

    def adopt(self, job: Job) -> bool:
        """Record ``job`` again in a store that lost it (moved aside while it ran), over a row
        rebuilt from its log. False: its id is taken."""
        with self._writing() as conn:
            conn.execute(
                "DELETE FROM jobs WHERE id = ? AND token IS NULL AND note = ?",
                (job.id, REBUILT_NOTE),
            )
            return insert_row(conn, job_columns(job), "INSERT OR IGNORE").rowcount > 0

    def add_history(self, command_text: str) -> None:
        """Remember a command for the launch dialog; a repeat moves to the newest place."""
        text = command_text.strip()
        if not text:
            return
        with self._writing() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO history (command_text, seq, used_at) VALUES "
                "(?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM history), ?)",
                (text_column(text), time.time()),
            )
            conn.execute(
                "DELETE FROM history WHERE seq <= (SELECT MAX(seq) FROM history) - ?",
                (HISTORY_KEPT,),
            )

    def record(self, job_id: int, transition: Transition) -> bool:
        """Make ``transition`` in job ``job_id``'s row; False where its states exclude it."""
        sql, params = transition.sql(job_id)
        with self._writing() as conn:
            return conn.execute(sql, params).rowcount > 0

    def try_record(self, job_id: int, *transitions: Transition) -> StoreError | None:
        """Make ``transitions`` in order, each with the same result however often made (a
        reader and the supervisor may both); where the disk is full or read-only the refusal
        is returned, never raised: the caller keeps what it could not record."""
        try:
            for transition in transitions:
                self.record(job_id, transition)
        except StoreError as error:
            if error.fault is None:
                raise
            return error
        return None

    def claim_cards(self, job_id: int) -> Job | None:
        """Move a waiting job to running unless a running job of this host holds its cards
        (returned): of two jobs that see a card free at one poll, only the first starts."""
        with self._writing() as conn:
            mine = row_to_job(conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())
            from gputop.core.mig_targets import target_keys  # not before the first frame

            wanted = target_keys(mine.physical_indices, mine.uuids)
            running = conn.execute(
                "SELECT * FROM jobs WHERE state = ? AND id != ? AND host = ?",
                (JobState.RUNNING.value, job_id, self.host),
            ).fetchall()
            for other in map(row_to_job, running):
                if target_keys(other.physical_indices, other.uuids) & wanted:
                    return other
            conn.execute(*CLAIMED.sql(job_id))
        return None

    def has_job(self, job_id: int) -> bool:
        """Whether the store records this job (a row rebuilt from its log does not count)."""
        return bool(
            self._rows(
                "SELECT 1 FROM jobs WHERE id = ? AND NOT (token IS NULL AND note IS ?)",
                (job_id, REBUILT_NOTE),
            )
        )

    # --- internals -----------------------------------------------------------------------

    def _select(self, sql: str, params: tuple[Any, ...] = ()) -> list[Job]:
        jobs = []
        for row in self._rows(sql, params):
            try:
                jobs.append(row_to_job(row))
            except Exception as error:
                raise StoreError(
                    f"The job store {self.db_path} holds a row for job {row['id']} that no "
                    f"gputop wrote ({type(error).__name__}: {clean(str(error))[:200]}). It "
                    "was left as it is: someone changed it by hand; remove that row, or set "
                    f"{STATE_DIR_ENV} to use another store."
                ) from None
        return jobs


def _insert_new(connection: sqlite3.Connection, job: Job) -> int:
    """``job``'s row under a new id; the id."""
    columns = job_columns(job)
    del columns["id"]
    return int(insert_row(connection, columns).lastrowid or 0)


# --- the jobs as they are now ----------------------------------------------------------


def current_jobs(store: JobStore, jobs: list[Job]) -> list[Job]:
    """``jobs`` (rows just read from ``store``) as they are now."""
    files = {} if store.in_memory else read_unrecorded(store.state_dir)
    now = time.time()
    return [_lost_if_gone(store, _unrecorded(store, job, files.get(job.id)), now) for job in jobs]


def _unrecorded(store: JobStore, job: Job, unrecorded: Unrecorded | None) -> Job:
    """``job`` with what its file holds, recorded where the store takes it."""
    if unrecorded is None:
        return job
    if job.state is JobState.ENDED:  # recorded already (the file is left over)
        forget_unrecorded(store.state_dir, job.id)
        return job
    seen = unrecorded.applied(job)
    if unrecorded.end is None and (seen.host != store.host or _supervisor_alive(seen)):
        return seen  # its supervisor records it (another host's: this reader cannot tell)
    if store.try_record(job.id, *unrecorded.transitions()) is not None:
        return seen
    forget_unrecorded(store.state_dir, job.id)
    return store.reread(job.id)


def _supervisor_alive(job: Job) -> bool:
    """The job's recorded supervisor still runs (started in this boot)."""
    if job.supervisor_pid is None or _from_earlier_boot(job):
        return False
    return process_alive(
        job.supervisor_pid, job.supervisor_start_time, job.supervisor_start_ticks, job.boot_id
    )


def _from_earlier_boot(job: Job) -> bool:
    return from_earlier_boot(job.boot_id, job.supervisor_start_time or job.created_at)


def _lost_note(job: Job, now: float) -> str | None:
    """Why an active job of this host is lost, or ``None`` where it is not."""
    if _from_earlier_boot(job):
        return (
            "the machine restarted since it was launched: none of its processes is "
            "running, and gputop will never signal its old pids"
        )
    if job.supervisor_pid is None:
        return (
            None if now - job.created_at < NEVER_STARTED_AFTER_S else "its supervisor never started"
        )
    if _supervisor_alive(job):
        return None
    note = (
        f"its supervisor (pid {job.supervisor_pid}) ended without recording how the "
        "job ended (killed, or the machine restarted)"
    )
    if job.pid is not None and process_alive(
        job.pid, job.pid_start_time, job.pid_start_ticks, job.boot_id
    ):
        # said as of then: the note stays while the process may end at any time
        note += (
            f"; the job (pid {job.pid}) was still running when this was found "
            f"(gputop jobs stop {job.id} ends it)"
        )
    return note


def _lost_if_gone(store: JobStore, job: Job, now: float) -> Job:
    """``job``, marked lost where it is active on this host and its supervisor is gone."""
    if not job.is_active or job.host != store.host or job.slurm_job_id is not None:
        return job  # Slurm's jobs have no supervisor: gputop.core.slurm.sync follows them
    note = _lost_note(job, now)
    if note is None:
        return job
    transition = lost(note, job.supervisor_pid, now)
    if store.try_record(job.id, transition) is not None:
        return transition.applied(job)
    return store.reread(job.id)  # lost, or ended by its supervisor just now
