"""A job's end kept beside the store (pending_end.py, docs/faults.md): written into blocks
reserved at the start, read back only when every value is one a supervisor writes, never
through a link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gputop.core.jobs.pending_end import (
    EndReservation,
    RecordedEnd,
    keep_end,
    read_pending_ends,
)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    return directory


def test_a_reserved_file_holds_its_blocks_before_it_holds_an_end(state: Path) -> None:
    reservation = EndReservation(state, 4)
    assert reservation.reserved
    assert os.stat(state / "run" / "4.end").st_blocks * 512 >= 4096
    assert read_pending_ends(state) == {}  # reserved, not yet an end
    end = RecordedEnd(4, 1_700_000_000.5, exit_code=7, note="done")
    assert reservation.keep(end)
    assert read_pending_ends(state) == {4: end}
    reservation.release()
    assert read_pending_ends(state) == {}
    assert not (state / "run" / "4.end").exists()


def test_an_end_kept_without_a_reservation_is_read_back(state: Path) -> None:
    end = RecordedEnd(2, 1_700_000_000.0, signal=15, stopped=True)
    assert keep_end(state, end)
    assert read_pending_ends(state) == {2: end}


@pytest.mark.parametrize(
    "record",
    [
        '{"job": 3, "ended_at": NaN, "exit_code": 1, "signal": null, "stopped": false}',
        '{"job": 3, "ended_at": 1e999, "exit_code": 1, "signal": null, "stopped": false}',
        '{"job": 3, "ended_at": 1.0, "exit_code": 256, "signal": null, "stopped": false}',
        '{"job": 3, "ended_at": 1.0, "exit_code": -1, "signal": null, "stopped": false}',
        '{"job": 3, "ended_at": 1.0, "exit_code": true, "signal": null, "stopped": false}',
        '{"job": 3, "ended_at": 1.0, "exit_code": null, "signal": 0, "stopped": false}',
        '{"job": 4, "ended_at": 1.0, "exit_code": 0, "signal": null, "stopped": false}',
        '{"job": 3, "ended_at": 1.0, "exit_code": 0, "signal": null, "stopped": "yes"}',
        "[3]",
        "not json",
    ],
)
def test_an_end_with_a_value_no_supervisor_writes_is_ignored(state: Path, record: str) -> None:
    run = state / "run"
    run.mkdir(mode=0o700)
    fd = os.open(run / "3.end", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, record.encode())
    os.close(fd)
    assert read_pending_ends(state) == {}


def test_a_link_in_an_ends_place_is_never_followed(state: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    record = {"job": 5, "ended_at": 1.0, "exit_code": 0, "signal": None, "stopped": False}
    elsewhere.write_text(json.dumps(record))
    run = state / "run"
    run.mkdir(mode=0o700)
    (run / "5.end").symlink_to(elsewhere)
    assert read_pending_ends(state) == {}
    assert EndReservation(state, 5).reserved is False
    assert json.loads(elsewhere.read_text()) == record  # untouched
