"""What each job used: real jobs on simulated cards, measured by their real supervisors.

The scenario's ``job_profile`` makes each launched job appear on its pinned simulated cards
(docs/scenario.md), so the supervisor's measurement is tested end to end: the sampler, the
energy counter, accounting stats, the store, and the end kept beside a full store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import HELPERS
from helpers.jobs import PYTHON, asked_job, gone, launch, wait_for_job, wait_until_ended
from helpers.small_filesystems import fill
from helpers.usage import scenario_file, sleeper
from helpers.waiting import wait_for

from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_rows import usage_measured
from gputop.core.jobs.unrecorded import (
    RESERVED_BYTES,
    RecordedEnd,
    Unrecorded,
    keep_end,
    read_pending_ends,
)
from gputop.core.jobs.usage import (
    PEAK_FROM_ACCOUNTING,
    PEAK_FROM_SAMPLES,
    CardUsage,
    JobUsage,
    usage_from_text,
)
from gputop.core.units import duration

MIB = 1024 * 1024
PROFILE = {"used_memory_mib": {"base": 1000, "amp": 500, "period": 4}, "sm_util": 60}
"""1000 MiB +- 500 over 4 s of the process's age: 1500 MiB at an age of 1 s, 13 s, ..."""


@pytest.fixture(name="measured")
def measured_fixture(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host_pid_namespace: None
) -> Path:
    """Simulated v100x4 cards on a running clock, measured every 0.1 s (the job's pid is
    taken as the driver's: see conftest's host_pid_namespace)."""
    monkeypatch.setenv("GPUTOP_FAKE", str(scenario_file(tmp_path, PROFILE)))
    monkeypatch.delenv("GPUTOP_FAKE_TIME")
    monkeypatch.setenv("GPUTOP_USAGE_POLL_S", "0.1")
    return state_dir


def test_a_job_records_what_it_used_on_each_card(measured: Path) -> None:
    launched = launch(measured, sleeper(2.5), gpus=(1, 2))
    ended = wait_until_ended(measured, launched.id)
    usage = ended.usage
    assert ended.status_text == "exited 0" and usage is not None
    took = ended.duration_s()
    assert took is not None
    exact, sampled = usage.per_card
    assert (exact.physical_index, sampled.physical_index) == (1, 2)
    assert (exact.uuid, sampled.uuid) == ended.uuids
    # GPU 1 has accounting on: the driver's exact peak, 1500 MiB at an age of 1 s.
    assert exact.peak_from == PEAK_FROM_ACCOUNTING and exact.peak_memory_bytes == 1500 * MIB
    assert sampled.peak_from == PEAK_FROM_SAMPLES and sampled.peak_memory_bytes is not None
    assert 500 * MIB <= sampled.peak_memory_bytes <= 1500 * MIB
    for card in usage.per_card:
        assert card.mean_sm_percent == 60.0
        assert took / 2 <= card.gpu_seconds <= took + 0.5  # seen within 0.5 s + a poll
        # GPU 1 draws 80 to 140 W, GPU 2 55 W (v100x4.json), over about the job's run.
        assert card.energy_j is not None
    assert 80 * 1.5 <= exact.energy_j <= 140 * (took + 1)  # type: ignore[operator]
    assert 55 * 1.5 <= sampled.energy_j <= 55 * (took + 1)  # type: ignore[operator]
    assert usage.gpu_seconds == exact.gpu_seconds + sampled.gpu_seconds
    assert usage.peak_memory_bytes is not None
    assert 1000 * MIB <= usage.peak_memory_bytes <= 3000 * MIB
    assert usage.samples >= 5


def test_a_job_shorter_than_the_poll_interval_is_measured_too(
    measured: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default poll is every 5 s; a 3-s job still gets samples (one, two seconds in),
    as the dashboard saw it, rather than none."""
    monkeypatch.delenv("GPUTOP_USAGE_POLL_S")
    launched = launch(measured, sleeper(3.0), gpus=(2,))
    ended = wait_until_ended(measured, launched.id)
    assert ended.status_text == "exited 0" and ended.usage is not None
    assert ended.usage.samples >= 2
    assert ended.usage.peak_memory_bytes is not None and ended.usage.gpu_seconds > 0


def test_a_running_job_has_its_usage_so_far(measured: Path) -> None:
    launched = launch(measured, sleeper(30), gpus=(3,))
    running = wait_for_job(
        measured, launched.id, lambda j: j.usage and j.usage.gpu_seconds >= 0.5, "usage"
    )
    assert running.is_active and running.usage is not None
    assert running.usage.per_card[0].physical_index == 3


def test_a_job_that_never_appears_on_its_cards_used_nothing(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", str(scenario_file(tmp_path, None)))
    monkeypatch.setenv("GPUTOP_USAGE_POLL_S", "0.1")
    ended = wait_until_ended(state_dir, launch(state_dir, sleeper(1), gpus=(0,)).id)
    assert ended.usage is not None
    (card,) = ended.usage.per_card
    assert (card.gpu_seconds, card.peak_memory_bytes, card.mean_sm_percent) == (0, None, None)
    assert ended.usage.peak_memory_bytes is None and ended.usage.samples >= 3


USAGE = JobUsage(
    per_card=(CardUsage(1, "GPU-x", 3 * MIB, 42.5, 12.0, 900.0, PEAK_FROM_ACCOUNTING),),
    peak_memory_bytes=3 * MIB,
    samples=7,
)


def test_usage_is_kept_with_an_end_the_store_cannot_take_yet(state_dir: Path) -> None:
    with JobStore.open(state_dir) as store:
        job = store.create_job(
            asked_job(name="x", command=["x"], physical_indices=[1], uuids=["GPU-x"])
        )
    assert keep_end(state_dir, RecordedEnd(job.id, 1e9, exit_code=0, usage=USAGE))
    assert read_pending_ends(state_dir)[job.id].usage == USAGE
    with JobStore.open(state_dir) as store:  # a gputop that can write records it
        recorded = store.get(job.id)
        assert store.reread(job.id).usage == USAGE
    assert recorded.usage == USAGE and read_pending_ends(state_dir) == {}


def test_a_usage_too_large_for_the_reserved_blocks_leaves_the_end_whole() -> None:
    cards = tuple(CardUsage(i, "GPU-" + "0" * 36, MIB, 1.0, 1.0, 1.0) for i in range(40))
    end = RecordedEnd(5, 1e9, exit_code=3, usage=JobUsage(cards, MIB, 1))
    data = Unrecorded(5, end=end).to_bytes()
    assert len(data) <= RESERVED_BYTES
    record = json.loads(data)
    assert record["exit_code"] == 3 and "usage" not in record


@pytest.mark.parametrize(
    "change",
    [
        {"gpu_seconds": -1},
        {"gpu_seconds": float("nan")},
        {"mean_sm_percent": 101},
        {"peak_memory_bytes": 2**61},
        {"peak_memory_bytes": 1.5},
        {"energy_j": True},
        {"peak_from": "guess"},
        {"gpu": "1"},
    ],
)
def test_a_stored_usage_out_of_range_reads_as_not_measured(change: dict[str, object]) -> None:
    record = USAGE.to_json()
    assert usage_from_text(json.dumps(record)) == USAGE
    record["per_card"][0].update(change)
    assert usage_from_text(json.dumps(record)) is None


def test_a_store_of_schema_3_gains_the_usage_column_and_keeps_its_jobs(state_dir: Path) -> None:
    import sqlite3

    with JobStore.open(state_dir) as store:
        old = store.create_job(asked_job(name="old.py", physical_indices=[1], uuids=[]))
    with sqlite3.connect(state_dir / "jobs.sqlite3") as connection:
        connection.execute("ALTER TABLE jobs DROP COLUMN usage")
        connection.execute("PRAGMA user_version = 3")
    with JobStore.open(state_dir) as store:
        kept = store.get(old.id)
        store.record(old.id, usage_measured(USAGE))
        measured = store.get(old.id)
    assert (kept.name, kept.usage, measured.usage) == ("old.py", None, USAGE)
    with sqlite3.connect(state_dir / "jobs.sqlite3") as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 4


def test_gputop_jobs_gives_each_job_its_usage(
    measured: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gputop.cli.main import main

    ended = wait_until_ended(measured, launch(measured, sleeper(1.5), gpus=(1, 2)).id)
    assert main(["jobs", "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    usage = record["usage"]
    assert ended.usage is not None and usage == ended.usage.to_json()
    assert [card["gpu"] for card in usage["per_card"]] == [1, 2]
    assert usage["gpu_seconds"] == sum(card["gpu_seconds"] for card in usage["per_card"]) > 0
    assert usage["peak_memory_bytes"] >= max(c["peak_memory_bytes"] for c in usage["per_card"])
    assert main(["jobs"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    time_at, peak_at = header.index("GPU TIME"), header.index("PEAK MEM")
    assert row[time_at:].split()[0] == duration(ended.usage.gpu_seconds)
    assert row[peak_at:].split()[0].endswith("G")


def test_a_supervisor_that_gives_up_on_a_full_disk_keeps_the_usage_with_the_end(
    small_state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    host_pid_namespace: None,
) -> None:
    from gputop.cli.main import main

    monkeypatch.setenv("GPUTOP_FAKE", str(scenario_file(tmp_path, PROFILE)))
    monkeypatch.setenv("GPUTOP_USAGE_POLL_S", "0.1")
    freed = small_state_dir.parent / "ballast"
    freed.write_bytes(b"\0" * 512 * 1024)
    go = tmp_path / "go"
    quiet = [PYTHON, str(HELPERS / "chatty_job.py"), "--lines", "1"]
    started = launch(small_state_dir, [*quiet, "--until", str(go)], gpus=(1,))
    running = wait_for_job(
        small_state_dir, started.id, lambda j: j.usage and j.usage.gpu_seconds > 0, "usage"
    )
    fill(small_state_dir.parent)  # the disk is full from here on
    go.touch()
    assert running.supervisor_pid is not None
    wait_for(lambda: gone(running.supervisor_pid), "the supervisor to give up and exit")
    kept = read_pending_ends(small_state_dir)[started.id]
    assert kept.usage is not None and running.usage is not None
    assert kept.usage.gpu_seconds >= running.usage.gpu_seconds > 0

    freed.unlink()
    assert main(["jobs", "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["usage"] == kept.usage.to_json()
    with JobStore.open(small_state_dir) as store:
        assert store.reread(started.id).usage == kept.usage


def test_where_nvml_cannot_be_opened_the_job_runs_unmeasured(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", str(tmp_path / "gone.json"))  # cannot be opened
    monkeypatch.setenv("GPUTOP_USAGE_POLL_S", "0.1")
    launched = launch(state_dir, sleeper(0.5), gpus=(1,))
    ended = wait_until_ended(state_dir, launched.id)
    assert ended.status_text == "exited 0" and ended.usage is None
