"""A gputop job whose cards had an Xid while it ran is marked (issue 42): in ``gputop jobs``
and its JSON record (from the history store), and in its end notification (``jobs wait``,
the dashboard's toast: from the store, or the dashboard's live health)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.history_health import EPOCH, STORM_UUID, WriteScenario, record_storm
from helpers.jobs import asked_job

from gputop.cli.main import main
from gputop.core.history.job_xids import recorded_job_xids
from gputop.core.history.store import open_for_reading
from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.jobs.notify import ENDED, JobEvent, event_environment, job_events
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_rows import ProcessSeen, ended, started
from gputop.core.jobs.xid_marks import live_job_xids, mark
from gputop.core.model import GpuHealth, GpuSample, XidEvent

OTHER_UUID = "GPU-22222222-aaaa-bbbb-cccc-000000000000"
# the storm: 10000 Xid 13 at 30 s, 5000 more at 60, 90, ... 210 s, 40 of 13 and 40 of 31
# at 120 s; recorded one row a minute
DURING_STORM = 20000  # a job from 20 s to 100 s: the rows of minutes 0 and 1


def job_on(state_dir: Path, uuid: str, index: int, start_s: float, end_s: float) -> Job:
    with JobStore.open(state_dir) as store:
        created = store.create_job(asked_job(physical_indices=[index], uuids=[uuid]))
        seen = ProcessSeen(4300200 + created.id, None, None)
        store.record(created.id, started(seen, EPOCH + start_s))
        store.record(created.id, ended(exit_code=1, ended_at=EPOCH + end_s))
        return store.get(created.id)


def test_gputop_jobs_marks_a_job_whose_card_had_an_xid_while_it_ran(
    tmp_path: Path,
    scenario_file: WriteScenario,
    private_state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = tmp_path / "history.sqlite3"
    record_storm(scenario_file, store)
    monkeypatch.setenv("GPUTOP_HISTORY_DB", str(store))
    hit = job_on(private_state_dir, STORM_UUID, 0, 20, 100)
    other_card = job_on(private_state_dir, OTHER_UUID, 1, 20, 100)
    later = job_on(private_state_dir, STORM_UUID, 0, 300, 400)
    assert main(["jobs"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert f"failed 1 ⚠ Xid 13 ×{DURING_STORM}" in lines[str(hit.id)]
    assert "Xid" not in lines[str(other_card.id)] and "Xid" not in lines[str(later.id)]
    assert main(["jobs", "--json"]) == 0
    records = {record["id"]: record for record in json.loads(capsys.readouterr().out)}
    (xid,) = records[hit.id]["xids"]
    assert xid["xid"] == 13 and xid["count"] == DURING_STORM
    assert xid["action"].startswith("restart the application")
    assert records[other_card.id]["xids"] == [] and records[later.id]["xids"] == []


def test_without_a_history_store_the_jobs_record_says_unknown(
    private_state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_on(private_state_dir, STORM_UUID, 0, 20, 100)
    assert main(["jobs", "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["xids"] is None  # cannot know, not "none"


def test_the_end_notification_names_the_xids_from_the_store(
    tmp_path: Path, scenario_file: WriteScenario, private_state_dir: Path
) -> None:
    store = tmp_path / "history.sqlite3"
    record_storm(scenario_file, store)
    ended = job_on(private_state_dir, STORM_UUID, 0, 20, 130)
    running = replace(ended, state=JobState.RUNNING, ended_at=None, exit_code=None)
    connection = open_for_reading(store)
    try:
        xids = recorded_job_xids(connection, ended, EPOCH + 1000)
    finally:
        connection.close()
    # to 130 s: minute 2's row (its 13s from 120 s on, and the 31s) is in too
    assert xids == ((13, DURING_STORM + 2 * 5000 + 40), (31, 40))
    (event,) = job_events([running], [ended], xids=lambda job: xids or ())
    assert event.kind == ENDED and event.xids == xids
    assert "its GPUs had Xid 13 ×30040, Xid 31 ×40 while it ran" in event.text
    assert event_environment(event)["GPUTOP_JOB_XIDS"] == "13:30040,31:40"
    assert mark(event.xids) == "⚠ Xid 13 ×30040 (+1)"
    assert "Xid" not in JobEvent(ENDED, ended).text  # nothing known: nothing said


def test_the_dashboard_marks_a_job_from_its_cards_live_health() -> None:
    job = Job(
        id=7,
        name="t",
        command=("true",),
        command_text="true",
        uses_shell=False,
        cwd="/",
        physical_indices=(0,),
        uuids=(STORM_UUID,),
        env={},
        mode=RunMode.DETACHED,
        state=JobState.RUNNING,
        log_path="/nonexistent.log",
        created_at=EPOCH,
        started_at=EPOCH + 10,
    )
    events = (XidEvent(48, EPOCH + 5), XidEvent(48, EPOCH + 20), XidEvent(79, EPOCH + 30))
    card = GpuSample(0, STORM_UUID, "A40", None, health=GpuHealth(xid_events=events))
    other = GpuSample(1, OTHER_UUID, "A40", None, health=GpuHealth(xid_events=events))
    xids = live_job_xids(job, [card, other], EPOCH + 40)
    assert xids == ((48, 1), (79, 1))  # the 48 from before it started is not its
    assert mark(xids) == "✖ Xid 48 (+1)"
