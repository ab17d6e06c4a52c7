"""The recorder's roll-up on a history store another user changed by hand: a span whose
figures are text, a blob, infinity or another kind is that row's fault, left as it is, never
the end of ``gputop record`` (which rolls up every 10 minutes, and would die at each)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.history import record_stepped

from gputop.core.history.retention import Retention, apply_retention
from gputop.core.history.store import open_for_recording

HOSTILE = ["'text'", "x'00ff'", "9e999", "-9e999", "-1"]
COLUMNS = ["start_t", "end_t", "process_id", "physical_index", "held_s", "peak_memory_bytes"]


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("value", HOSTILE)
def test_a_hand_edited_span_is_left_and_the_rest_rolled_up(
    tmp_path: Path, column: str, value: str
) -> None:
    store = tmp_path / "state" / "history.sqlite3"
    last = record_stepped("demo", store, samples=4)
    connection = open_for_recording(store, [])
    try:
        spans = connection.execute("SELECT COUNT(*) FROM process_spans").fetchone()[0]
        assert spans > 1
        connection.execute(f"UPDATE process_spans SET {column} = {value} WHERE id = 1")
        apply_retention(connection, last.timestamp + 3 * 86400, Retention())
        merged = connection.execute(
            "SELECT COUNT(*) FROM process_spans WHERE resolution_s = 86400"
        ).fetchone()[0]
        kept = connection.execute(f"SELECT {column} FROM process_spans WHERE id = 1").fetchall()
    finally:
        connection.close()
    assert merged > 0  # the other spans were rolled up
    if column == "end_t" and value.startswith("-"):
        assert kept == []  # ended before 1970: gone with every span past the retention
    else:
        assert len(kept) == 1  # the hand-edited one is left as it was found
