"""The history store's tables, its version, and how a store is created or refused.

Kept apart from the queries (report.py, writer.py, retention.py): the schema changes when
what is recorded changes, the queries when what is asked changes. docs/history.md describes
every column and its unit.

A sample ends at ``t`` (epoch seconds) and stands for the ``duration_s`` seconds before it:
the time since the recorder's previous sample for a raw one, the seconds recorded in that
minute or hour for a rolled-up one (``resolution_s`` 60 or 3600, 0 for raw; its ``t`` is
that of the last sample merged into it). A process row's ``held_s`` is NULL in
a raw sample (it held the card for the whole sample) and its ``peak_memory_bytes`` NULL (the
peak is the memory); roll-ups fill both.
"""

from __future__ import annotations

import contextlib
import sqlite3

SCHEMA_VERSION = 1

RAW = 0
MINUTE = 60
HOUR = 3600

_SCHEMA = """
CREATE TABLE strings (
    id INTEGER PRIMARY KEY,
    text TEXT NOT NULL UNIQUE
);
CREATE TABLE processes (
    id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    start_time REAL,
    user_id INTEGER,
    command_id INTEGER,
    job TEXT,
    UNIQUE (pid, start_time)
);
CREATE TABLE samples (
    id INTEGER PRIMARY KEY,
    t REAL NOT NULL,
    duration_s REAL NOT NULL,
    resolution_s INTEGER NOT NULL
);
CREATE INDEX samples_by_time ON samples(resolution_s, t);
CREATE INDEX samples_t ON samples(t);
CREATE TABLE gpu_samples (
    sample_id INTEGER NOT NULL,
    physical_index INTEGER NOT NULL,
    uuid_id INTEGER,
    utilization_gpu_percent REAL,
    memory_used_bytes INTEGER,
    memory_total_bytes INTEGER,
    power_w REAL,
    temperature_c REAL,
    PRIMARY KEY (sample_id, physical_index)
) WITHOUT ROWID;
CREATE TABLE process_samples (
    sample_id INTEGER NOT NULL,
    physical_index INTEGER NOT NULL,
    process_id INTEGER NOT NULL,
    memory_bytes INTEGER,
    sm_util_percent REAL,
    held_s REAL,
    peak_memory_bytes INTEGER
);
CREATE INDEX process_samples_by_sample ON process_samples(sample_id);
"""

MIGRATIONS: dict[int, tuple[str, ...]] = {}
"""version N -> N+1 statements, as the job store keeps them (none yet)."""


def create_schema(connection: sqlite3.Connection) -> None:
    """Create the tables of an empty store (version 0) in one transaction."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        if int(connection.execute("PRAGMA user_version").fetchone()[0]) == 0:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


def migrate(connection: sqlite3.Connection, version: int) -> None:
    """Bring an older store up to SCHEMA_VERSION in one transaction, keeping every row."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for step in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[step]:
                connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise
