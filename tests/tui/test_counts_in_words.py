"""Counts on the status lines agree with their nouns (issue 40: ``lab: 1 hosts``): one host,
one GPU; two hosts, no GPUs."""

from __future__ import annotations

import dataclasses

import pytest

from gputop.cli.jobs_command import stop_question
from gputop.cli.run_command import describe_launch
from gputop.core.free_cards import FreePolicy
from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.remote.status import HostStatus, LinkState
from gputop.core.sampling.source import open_backend
from gputop.core.units import counted
from gputop.tui.lab.host_line import lab_status_line
from gputop.tui.widgets.status_bar import StatusBar


def _one_gpu_snapshot():  # type: ignore[no-untyped-def]
    backend = open_backend("mixed", environ={"GPUTOP_FAKE_TIME": "30"})
    try:
        snapshot = backend.sample()
    finally:
        backend.close()
    return dataclasses.replace(snapshot, gpus=snapshot.gpus[:1])


def test_a_count_of_one_takes_the_singular() -> None:
    assert [counted(n, "host") for n in (0, 1, 2)] == ["0 hosts", "1 host", "2 hosts"]
    assert counted(1, "GPU") == "1 GPU" and counted(8, "GPU") == "8 GPUs"


def test_the_lab_line_says_one_host_and_one_gpu() -> None:
    live = HostStatus("gpu01", LinkState.LIVE, snapshot=_one_gpu_snapshot())
    line = lab_status_line([live], 1.0, 0.0).plain
    assert "lab: 1 host, 1 GPU " in line
    two = lab_status_line([HostStatus("a", LinkState.CONNECTING)] * 2, 1.0, 0.0).plain
    assert "lab: 2 hosts, 0 GPUs " in two


def test_a_machine_with_one_gpu_says_one_gpu() -> None:
    bar = StatusBar()
    shown: list[str] = []
    bar.show_line = lambda line: shown.append(line.plain)  # type: ignore[method-assign]
    bar.show(_one_gpu_snapshot(), 1.0)
    assert "  1 GPU  " in shown[0]


def _waiting_for_any(count: int) -> Job:
    """A ``run --auto COUNT --wait`` job, queued."""
    return Job(
        id=1, name="train.py", command=("python", "train.py"), command_text="python train.py",
        uses_shell=False, cwd="/", physical_indices=(), uuids=(), env={},
        mode=RunMode.DETACHED, state=JobState.WAITING, log_path="/dev/null", created_at=0.0,
        wait_for_free=True, wait_count=count,
    )  # fmt: skip


@pytest.mark.parametrize(("count", "cards"), [(1, "1 GPU"), (3, "3 GPUs")])
def test_a_job_waiting_for_any_cards_counts_them_in_words(count: int, cards: str) -> None:
    assert f"waiting for any {cards}?" in stop_question(_waiting_for_any(count))
    verb = "is" if count == 1 else "are"
    described = describe_launch(_waiting_for_any(count), _one_gpu_snapshot(), FreePolicy())
    assert f"It waits until {cards} {verb} free" in described, described
