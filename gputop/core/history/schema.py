"""The history store's tables, its version, and how a store is created or refused.

Kept apart from the queries (report.py, writer.py, retention.py): the schema changes when
what is recorded changes. docs/history.md describes every column and its unit. A sample
ends at ``t`` and stands for the ``duration_s`` before it; processes are kept as spans (at
most ``SPAN_MAX_S``) holding the sums the report needs and their idle runs, so 200
processes cost a few rows an hour instead of 720 (spans.py).
"""

from __future__ import annotations

from gputop.core.history.claim_spans import SCHEMA as CLAIM_SCHEMA

SCHEMA_VERSION = 3

RAW = 0
MINUTE = 60
HOUR = 3600
DAY = 86400

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
    sm_active_percent REAL,
    tensor_active_percent REAL,
    dram_active_percent REAL,
    throttled REAL,
    PRIMARY KEY (sample_id, physical_index)
) WITHOUT ROWID;
CREATE TABLE process_spans (
    id INTEGER PRIMARY KEY,
    process_id INTEGER NOT NULL,
    physical_index INTEGER NOT NULL,
    start_t REAL NOT NULL,
    end_t REAL NOT NULL,
    held_s REAL NOT NULL,
    samples INTEGER NOT NULL,
    idle_runs TEXT NOT NULL,
    memory_byte_seconds REAL,
    memory_known_s REAL NOT NULL,
    peak_memory_bytes INTEGER,
    sm_percent_seconds REAL,
    sm_known_s REAL NOT NULL,
    resolution_s INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX process_spans_by_end ON process_spans(end_t);
CREATE INDEX process_spans_to_merge ON process_spans(resolution_s, end_t);
CREATE TABLE clock_steps (
    t REAL NOT NULL,
    step_s REAL NOT NULL
);
"""

ACTIVITY_COLUMNS = (
    "sm_active_percent",
    "tensor_active_percent",
    "dram_active_percent",
    "throttled",
)
"""Version 2: GPM's SM active, tensor active and DRAM (percent, docs/activity.md), and the
share of the sample's time a throttling clock event reason held (0 or 1 raw)."""

HEALTH_COLUMNS = (
    "ecc_corrected_volatile",
    "ecc_uncorrected_volatile",
    "ecc_corrected_aggregate",
    "ecc_uncorrected_aggregate",
    "retired_single_bit",
    "retired_double_bit",
    "retired_pending",
    "remapped_correctable",
    "remapped_uncorrectable",
    "remapped_pending",
    "remapped_failed",
    "pcie_replays",
    "nvlink_crc_errors",
)
"""The health counters kept (flags as 0 or 1), in the order of health_counters' columns."""

HEALTH_SCHEMA: tuple[str, ...] = (
    # One row per (card, Xid, minute of its first arrival in the row): a storm of thousands
    # a second is one row a minute, ``count`` exact. ``first_t``/``last_t``: the first and
    # last arrival in it (epoch seconds, to within a sample for a run the sample continued).
    "CREATE TABLE xid_events (id INTEGER PRIMARY KEY, physical_index INTEGER NOT NULL, "
    "uuid_id INTEGER, xid INTEGER NOT NULL, minute INTEGER NOT NULL, first_t REAL NOT NULL, "
    "last_t REAL NOT NULL, count INTEGER NOT NULL)",
    "CREATE INDEX xid_events_by_key ON xid_events(physical_index, xid, minute)",
    "CREATE INDEX xid_events_by_time ON xid_events(last_t)",
    # The processes (and through them the gputop jobs) on the card when an Xid of the row
    # arrived.
    "CREATE TABLE xid_processes (event_id INTEGER NOT NULL, process_id INTEGER NOT NULL, "
    "PRIMARY KEY (event_id, process_id)) WITHOUT ROWID",
    # A card's health counters, a row when one of them changed (and the first reading of a
    # recorder's run where it differs from the last row kept); NULL: not on this card.
    "CREATE TABLE health_counters (t REAL NOT NULL, physical_index INTEGER NOT NULL, "
    "uuid_id INTEGER, " + ", ".join(f"{column} INTEGER" for column in HEALTH_COLUMNS) + ")",
    "CREATE INDEX health_counters_by_time ON health_counters(physical_index, t)",
)
"""Version 3: the Xids and the health counters (docs/health.md)."""


MIGRATIONS: dict[int, tuple[str, ...]] = {
    # version 1 -> 2: the wall clock's steps the recorder saw (recorder.py: at ``t``, the
    # time of the first sample after it, the clock jumped ``step_s`` seconds, < 0 back),
    # the claims recorded (claim_spans.py, docs/claims.md), and GPM's activity per card
    # (ACTIVITY_COLUMNS, docs/activity.md).
    1: (
        "CREATE TABLE clock_steps (t REAL NOT NULL, step_s REAL NOT NULL)",
        *CLAIM_SCHEMA,
        *(f"ALTER TABLE gpu_samples ADD COLUMN {column} REAL" for column in ACTIVITY_COLUMNS),
    ),
    # version 2 -> 3: every Xid, coalesced per card, code and minute, with the processes
    # on the card then, and the health counters when they change (HEALTH_SCHEMA,
    # docs/health.md, docs/history.md).
    2: HEALTH_SCHEMA,
}
"""version N -> N+1 statements, as the job store keeps them."""

SCHEMA = (
    *(statement for statement in _SCHEMA.split(";") if statement.strip()),
    *CLAIM_SCHEMA,
    *HEALTH_SCHEMA,
)
"""An empty store's tables (sqlite_files.create)."""
