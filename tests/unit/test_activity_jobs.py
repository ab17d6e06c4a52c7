"""What each job's cards did over its run: GPM activity and throttled time in its usage.

Real jobs on simulated cards, measured by their real supervisors (as tests/real/test_jobs_usage.py):
the scenario's ``job_profile.activity`` is what GPM answers for a card while the job's
process is pinned to it (docs/scenario.md), so the usage's means are known exactly; one card
is power capped the whole time, and an A100 has no GPM. docs/activity.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.jobs import wait_until_ended
from helpers.scenarios import minimal_gpu
from helpers.usage import sleeper

from gputop.core.jobs.launch import LaunchRequest, launch_job
from gputop.core.jobs.model import Job
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.usage import CardUsage, JobUsage, usage_from_text, usage_summary
from gputop.core.sampling.source import open_backend

PROFILE = {
    "used_memory_mib": 1000,
    "sm_util": 60,
    "activity": {"sm_active": 40, "tensor_active": 25, "dram_active": 30},
}
H100 = {"name": "NVIDIA H100 80GB HBM3", "cuda_compute_capability": [9, 0]}


@pytest.fixture(name="measured")
def measured_fixture(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host_pid_namespace: None
) -> Path:
    gpus = [
        minimal_gpu(**H100, uuid="GPU-11111111-aaaa-bbbb-cccc-000000000000",
                    pci_bus_id="00000000:07:00.0"),
        minimal_gpu(**H100, uuid="GPU-11111111-aaaa-bbbb-cccc-000000000001",
                    pci_bus_id="00000000:08:00.0",
                    clock_event_reasons=[{"reasons": ["sw_power_cap"], "until_s": 1e9}]),
        minimal_gpu(uuid="GPU-11111111-aaaa-bbbb-cccc-000000000002",
                    pci_bus_id="00000000:09:00.0"),
    ]  # fmt: skip
    scenario = tmp_path / "jobs.json"
    document = {"driver_version": "550.127.05", "job_profile": PROFILE, "gpus": gpus}
    scenario.write_text(json.dumps(document))
    monkeypatch.setenv("GPUTOP_FAKE", str(scenario))
    monkeypatch.delenv("GPUTOP_FAKE_TIME")
    monkeypatch.setenv("GPUTOP_USAGE_POLL_S", "0.2")
    return state_dir


def launch(directory: Path, scenario: str, gpus: tuple[int, ...]) -> Job:
    """A job pinned to ``gpus`` of ``scenario``, as the dashboard launches it."""
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "30"})
    try:
        snapshot = backend.sample()
    finally:
        backend.close()
    store = JobStore.open(directory)
    try:
        request = LaunchRequest(command=sleeper(2.5), physical_indices=gpus)
        return launch_job(store, request, snapshot)
    finally:
        store.close()


def test_a_jobs_usage_has_its_cards_activity_and_throttled_seconds(
    measured: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gputop.cli.main import main

    launched = launch(measured, os.environ["GPUTOP_FAKE"], (0, 1, 2))
    ended = wait_until_ended(measured, launched.id)
    usage = ended.usage
    took = ended.duration_s()
    assert usage is not None and took is not None
    plain, capped, ampere = usage.per_card
    for card in (plain, capped):
        assert card.mean_sm_active_percent == 40.0
        assert card.mean_tensor_active_percent == 25.0
        assert card.mean_dram_active_percent == 30.0
    assert plain.throttled_seconds == 0.0
    assert capped.throttled_seconds is not None
    assert took / 2 <= capped.throttled_seconds <= took + 1.0  # capped all along
    assert ampere.mean_sm_active_percent is None and ampere.mean_tensor_active_percent is None
    assert ampere.throttled_seconds == 0.0
    line = usage_summary(usage)
    assert "SM active 40 %, tensor 25 %, DRAM 30 %, throttled" in line
    assert main(["jobs", "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    cards = record["usage"]["per_card"]
    assert [c["mean_sm_active_percent"] for c in cards] == [40.0, 40.0, None]
    assert cards[1]["throttled_seconds"] == capped.throttled_seconds


def _card(**changes: object) -> dict[str, object]:
    card = CardUsage(0, "GPU-x", 1, 50.0, 10.0, None, mean_sm_active_percent=12.5,
                     throttled_seconds=3.0).to_json()  # fmt: skip
    card.update(changes)
    return card


@pytest.mark.parametrize(
    "change",
    [{"mean_sm_active_percent": 101}, {"mean_tensor_active_percent": -1},
     {"mean_dram_active_percent": "high"}, {"throttled_seconds": 1e300},
     {"throttled_seconds": float("nan")}],
)  # fmt: skip
def test_a_stored_activity_out_of_range_reads_as_not_measured(change: dict[str, object]) -> None:
    text = json.dumps({"per_card": [_card(**change)], "peak_memory_bytes": 1, "samples": 3})
    assert usage_from_text(text) is None


def test_an_older_record_without_activity_reads_with_none() -> None:
    card = _card()
    for key in ("mean_sm_active_percent", "mean_tensor_active_percent",
                "mean_dram_active_percent", "throttled_seconds"):  # fmt: skip
        del card[key]
    usage = usage_from_text(json.dumps({"per_card": [card], "peak_memory_bytes": 1, "samples": 3}))
    assert usage == JobUsage((CardUsage(0, "GPU-x", 1, 50.0, 10.0, None),), 1, 3)


def test_the_jobs_tables_show_the_cards_sm_active_and_a_throttle_mark() -> None:
    from gputop.core import job_columns
    from gputop.core.jobs.usage import activity_cell
    from gputop.core.remote.host_jobs import host_jobs

    throttled = CardUsage(0, "GPU-a", 1, None, 5.0, None, mean_sm_active_percent=70.0,
                          throttled_seconds=2.0)  # fmt: skip
    calm = CardUsage(1, "GPU-b", 1, None, 5.0, None, mean_sm_active_percent=30.0,
                     throttled_seconds=0.0)  # fmt: skip
    ampere = CardUsage(2, "GPU-c", 1, None, 5.0, None)
    assert activity_cell(JobUsage((throttled, calm, ampere), 1, 3)) == "50 % ⚠"
    assert activity_cell(JobUsage((calm,), 1, 3)) == "30 %"
    assert activity_cell(JobUsage((ampere,), 1, 3)) == "-"
    record = JobUsage((throttled,), 1, 3).to_json()
    (job,) = host_jobs(0, "node1", [{"id": 3, "status": "exited", "usage": record}])
    assert job_columns.SM_ACTIVE.text(job, 0.0, False) == "70 % ⚠"
