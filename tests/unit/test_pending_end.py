"""What a supervisor could not record, kept beside the store (pending_end.py, docs/faults.md):
written into blocks reserved at the start, read back only when every value is one a
supervisor writes, never through a link; never misread by a gputop of the format before;
applied by every reader, and recorded once its supervisor is done with it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers.jobs import asked_job
from helpers.pending_end_v1 import read_as_before

from gputop.core.jobs.model import Job
from gputop.core.jobs.store import NEVER_STARTED_AFTER_S, JobStore
from gputop.core.jobs.store_rows import Transition
from gputop.core.jobs.unrecorded import (
    RESERVED_BYTES,
    EndReservation,
    ProcessSeen,
    RecordedEnd,
    Unrecorded,
    keep_end,
    read_pending_ends,
    read_unrecorded,
)
from gputop.core.jobs.usage import CardUsage, JobUsage
from gputop.core.process_control import process_start_time


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
    assert reservation.keep_all(Unrecorded(4, end=end))
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


# --- every transition the store refused, in one record ----------------------------------------

SUPERVISOR = ProcessSeen(4321, 1_700_000_000.25, 4321)
STARTED = ProcessSeen(4322, 1_700_000_001.5, 4322)
END = RecordedEnd(6, 1_700_000_100.0, exit_code=3, note="done")
EVERYTHING = Unrecorded(
    6, SUPERVISOR, STARTED, 1_700_000_001.0, "log cut: kept under 1 GiB", True, END
)


def run_file(state: Path, job_id: int) -> Path:
    return state / "run" / f"{job_id}.end"


def plant(state: Path, job_id: int, data: bytes) -> None:
    run = state / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(run / f"{job_id}.end", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, data)
    os.close(fd)


def test_every_transition_is_kept_in_the_reserved_blocks_and_read_back(state: Path) -> None:
    reservation = EndReservation(state, 6)
    start_only = Unrecorded(6, SUPERVISOR, STARTED, 1_700_000_001.0)
    assert reservation.keep_all(start_only)
    assert read_unrecorded(state) == {6: start_only}
    assert read_pending_ends(state) == {}  # no end yet
    assert reservation.keep_all(EVERYTHING)
    assert read_unrecorded(state) == {6: EVERYTHING}
    assert read_pending_ends(state) == {6: END}
    assert os.stat(run_file(state, 6)).st_size == RESERVED_BYTES  # written in place
    assert reservation.clear()
    assert read_unrecorded(state) == {}
    reservation.release()


def test_a_shorter_record_leaves_nothing_of_a_longer_one_behind_it(state: Path) -> None:
    reservation = EndReservation(state, 6)
    assert reservation.keep_all(dataclasses.replace(EVERYTHING, note="x" * 900))
    short = Unrecorded(6, SUPERVISOR)
    assert reservation.keep_all(short)
    data = run_file(state, 6).read_bytes()
    record = short.to_bytes()
    assert data == record + b" " * (RESERVED_BYTES - len(record))
    assert read_unrecorded(state) == {6: short}
    reservation.release()


def test_a_half_written_record_reads_as_nothing_kept(state: Path) -> None:
    longer = EVERYTHING.to_bytes()
    shorter = Unrecorded(6, SUPERVISOR).to_bytes()
    plant(state, 6, shorter + longer[len(shorter) :])  # a reader between two writes
    assert read_unrecorded(state) == {}
    plant(state, 6, longer[: len(longer) // 2])
    assert read_unrecorded(state) == {}


def test_a_record_too_large_for_the_blocks_loses_the_usage_then_the_notes_length(
    state: Path,
) -> None:
    cards = tuple(CardUsage(i, "GPU-" + "0" * 36, 1 << 20, 1.0, 1.0, 1.0) for i in range(40))
    wide = "é" * 1000  # escaped in the record: six bytes each
    end = RecordedEnd(6, 1e9, exit_code=3, note=wide, usage=JobUsage(cards, 1 << 20, 1))
    kept = Unrecorded(6, SUPERVISOR, STARTED, 1e9, wide, True, end)
    data = kept.to_bytes()
    assert len(data) <= RESERVED_BYTES
    reservation = EndReservation(state, 6)
    assert reservation.keep_all(kept)
    (read,) = read_unrecorded(state).values()
    assert read.end is not None and read.end.exit_code == 3 and read.end.usage is None
    assert read.started == STARTED and read.stop_requested
    assert read.note and wide.startswith(read.note)
    reservation.release()


# --- a gputop of the format before (tests/helpers/pending_end_v1.py) --------------------------


def test_the_old_reader_ignores_a_file_that_holds_no_end(state: Path) -> None:
    reservation = EndReservation(state, 6)
    assert reservation.keep_all(Unrecorded(6, SUPERVISOR, STARTED, 1e9, "log cut", True))
    assert read_as_before(state / "run", 6) is None
    assert reservation.clear()
    assert read_as_before(state / "run", 6) is None
    reservation.release()


def test_the_old_reader_reads_the_end_of_a_file_that_holds_more(state: Path) -> None:
    reservation = EndReservation(state, 6)
    assert reservation.keep_all(EVERYTHING)
    assert read_as_before(state / "run", 6) == END
    reservation.release()
    assert keep_end(state, END)  # as `jobs stop` keeps it
    assert read_as_before(state / "run", 6) == END


def test_a_file_of_the_old_format_is_read(state: Path) -> None:
    record = {"job": 6, "ended_at": 1e9, "exit_code": None, "signal": 9, "stopped": True}
    data = json.dumps({**record, "note": None}).encode()
    plant(state, 6, data + b"\0" * (RESERVED_BYTES - len(data)))  # its reserved blocks
    end = RecordedEnd(6, 1e9, signal=9, stopped=True)
    assert read_unrecorded(state) == {6: Unrecorded(6, end=end)}


# --- files no supervisor writes ---------------------------------------------------------------

START = '"started": {"pid": 5, "start_time": 1.0, "session": 5, "at": 2.0}'


@pytest.mark.parametrize(
    "record",
    [
        '{"job": 6, "supervisor": {"pid": 0, "start_time": 1.0, "session": 1}}',
        '{"job": 6, "supervisor": {"pid": 4194305, "start_time": 1.0, "session": 1}}',
        '{"job": 6, "supervisor": {"pid": true, "start_time": 1.0, "session": 1}}',
        '{"job": 6, "supervisor": {"pid": 5, "start_time": NaN, "session": 5}}',
        '{"job": 6, "supervisor": {"pid": 5, "start_time": -1, "session": 5}}',
        '{"job": 6, "supervisor": {"pid": 5, "start_time": 1.0, "session": -5}}',
        '{"job": 6, "supervisor": [5, 1.0, 5]}',
        '{"job": 6, "started": {"pid": 5, "start_time": 1.0, "session": 5, "at": 1e13}}',
        '{"job": 6, "started": {"pid": 5, "start_time": 1.0, "session": 5, "at": null}}',
        '{"job": 6, "started": {"pid": 99999999999999999999, "start_time": 1.0, "at": 2.0}}',
        '{"job": 6, ' + START + ', "stop_requested": "yes"}',
        '{"job": 6, ' + START + ', "set_note": 5}',
        '{"job": 6, ' + START + ', "ended_at": 1e999, "exit_code": 0, "stopped": false}',
        '{"job": 6, ' + START + ', "ended_at": 1.0, "exit_code": 0, "stopped": null}',
        '{"job": 7, ' + START + "}",
        '{"job": "6", ' + START + "}",
        '{"job": 6.0, ' + START + "}",
        '{"job": 6, ' + START[: len(START) // 2],
        "[" * 4000,
        "\xff\xfe not text",
    ],
)
def test_a_file_with_anything_no_supervisor_writes_is_ignored(state: Path, record: str) -> None:
    plant(state, 6, record.encode("utf-8", "surrogateescape"))
    assert read_unrecorded(state) == {}


def test_session_0_reads_as_no_session(state: Path) -> None:
    """getsid() gives 0 in a container whose session leader is outside its pid namespace
    (how the CI runs): such a file is a supervisor's all the same, its session unknown."""
    plant(state, 6, b'{"job": 6, "supervisor": {"pid": 5, "start_time": 1.0, "session": 0}}')
    assert read_unrecorded(state) == {6: Unrecorded(6, ProcessSeen(5, 1.0, None))}


def test_job_true_is_not_job_1(state: Path) -> None:
    plant(state, 1, ('{"job": true, ' + START + "}").encode())
    assert read_unrecorded(state) == {}


def test_a_file_larger_than_its_blocks_is_ignored(state: Path) -> None:
    record = Unrecorded(6, SUPERVISOR).to_bytes()
    plant(state, 6, record + b" " * (10 * 1024 * 1024))  # 10 MB
    assert read_unrecorded(state) == {}


def test_a_file_of_another_user_is_ignored(state: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    plant(state, 6, Unrecorded(6, SUPERVISOR).to_bytes())
    os.chown(run_file(state, 6), 65534, 65534)
    assert read_unrecorded(state) == {}


def test_a_link_to_a_valid_record_is_never_followed(state: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(Unrecorded(6, SUPERVISOR, STARTED, 2.0).to_bytes())
    (state / "run").mkdir(mode=0o700)
    run_file(state, 6).symlink_to(elsewhere)
    assert read_unrecorded(state) == {}


# --- readers apply the file -------------------------------------------------------------------


def new_job(store: JobStore, created_ago_s: float) -> Job:
    job = store.create_job(asked_job(name="x", command=["x"], uuids=[]))
    store.record(job.id, Transition({"created_at": time.time() - created_ago_s}, states=None))
    return job


def me() -> ProcessSeen:
    return ProcessSeen(os.getpid(), process_start_time(os.getpid()), os.getsid(0))


def test_a_start_only_in_the_file_shows_running_and_is_never_taken_as_lost(
    state: Path,
) -> None:
    with JobStore.open(state) as store:
        job = new_job(store, created_ago_s=3 * NEVER_STARTED_AFTER_S)  # no supervisor recorded
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        started = ProcessSeen(sleeper.pid, process_start_time(sleeper.pid), None)
        reservation = EndReservation(state, job.id)  # its supervisor: this test, alive
        assert reservation.keep_all(Unrecorded(job.id, me(), started, time.time()))
        with JobStore.open(state) as store:
            seen = store.get(job.id)
            assert (seen.status, seen.pid, seen.supervisor_pid) == (
                "running",
                sleeper.pid,
                me().pid,
            )
            assert store.reread(job.id).pid is None  # its supervisor records it, not a reader
        assert read_unrecorded(state)  # left to its supervisor
        reservation.release()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_file_of_a_supervisor_that_is_gone_is_recorded_and_removed(state: Path) -> None:
    with JobStore.open(state) as store:
        job = new_job(store, created_ago_s=1.0)
    gone = subprocess.Popen(["true"])
    gone.wait()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        started = ProcessSeen(sleeper.pid, process_start_time(sleeper.pid), None)
        supervisor = ProcessSeen(gone.pid, time.time() - 5, None)
        plant(state, job.id, Unrecorded(job.id, supervisor, started, 2e9).to_bytes())
        with JobStore.open(state) as store:
            seen = store.get(job.id)
            row = store.reread(job.id)
        assert seen.status == "lost" and f"the job (pid {sleeper.pid}) was still running when" in (
            seen.note or ""
        )
        assert (row.pid, row.started_at, row.supervisor_pid) == (sleeper.pid, 2e9, gone.pid)
        assert not run_file(state, job.id).exists()
    finally:
        sleeper.kill()
        sleeper.wait()
