"""What the demo can show (issue 28): a distributed job's ranks, a launched job on the
simulated cards, and a plain word where a key cannot act on a simulated process."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from helpers.dashboard import first_sample, make_app

from gputop.core.fake import resolve_scenario_path
from gputop.core.model import ProcessOrigin
from gputop.core.sampling.source import open_backend
from gputop.tui.screens.confirm import ConfirmScreen
from gputop.tui.widgets.process_table import ProcessTable

BIG = (160, 48)


def test_the_demo_has_a_distributed_job_with_its_rank_variables() -> None:
    backend = open_backend("demo", environ={"GPUTOP_FAKE_TIME": "30"})
    try:
        snapshot = backend.sample()
    finally:
        backend.close()
    ranks = {
        p.cuda.rank: (gpu.physical_index, p.cuda)
        for gpu in snapshot.gpus
        for p in gpu.processes
        if p.cuda is not None and p.cuda.rank is not None
    }
    assert sorted(ranks) == [0, 1]
    for rank, (card, cuda) in ranks.items():
        assert cuda.world_size == 2 and cuda.local_rank == rank
        assert cuda.devices[rank] == card and not cuda.mismatch


async def test_r_collapses_the_demo_s_distributed_job() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        table.focus()
        await pilot.pause()
        rank_row = next(i for i, r in enumerate(table.rows) if "[rank 0/2]" in r.text(9))
        table.move_cursor(rank_row)
        before = table.row_count
        await pilot.press("r")
        assert table.row_count == before - 1
        assert any(row.group for row in table.rows)


async def test_t_on_a_simulated_process_says_it_is_simulated() -> None:
    app = make_app("demo", user="root")  # root's Xorg: the user's own, as far as names go
    messages: list[str] = []
    shown = app.notify

    def notify(message: str, **options: object) -> None:
        messages.append(message)
        shown(message, **options)  # type: ignore[arg-type]

    app.notify = notify  # type: ignore[method-assign]
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        table.focus()
        await pilot.pause()
        row = next(i for i, r in enumerate(table.rows) if r.process.user == "root")
        assert table.rows[row].process.origin is ProcessOrigin.SIMULATED
        table.move_cursor(row)
        await pilot.press("t")
        assert isinstance(app.screen, ConfirmScreen)  # what it would send, as for a real one
        await pilot.press("y")
        assert any("is simulated (--fake)" in m for m in messages), messages
        assert not any("restarted" in m for m in messages)


def test_simulated_processes_started_after_the_simulated_machine_booted() -> None:
    backend = open_backend("demo", environ={"GPUTOP_FAKE_TIME": "30"})
    try:
        snapshot = backend.sample()
    finally:
        backend.close()
    assert snapshot.host_stats is not None and snapshot.host_stats.uptime_s is not None
    booted = snapshot.timestamp - snapshot.host_stats.uptime_s
    starts = [p.start_time for g in snapshot.gpus for p in g.processes if p.start_time]
    assert starts and min(starts) > booted


def demo_with_own_uuids(directory: Path) -> str:
    """The demo scenario with UUIDs of this test's own: a process pinned to its cards is
    listed by no other test's demo (another file's snapshot may run meanwhile)."""
    document = json.loads(resolve_scenario_path("demo").read_text())
    assert document["job_profile"]  # what lists a job on the simulated cards
    for gpu in document["gpus"]:
        gpu["uuid"] = f"GPU-{uuid.uuid4()}"
    path = directory / "demo-own.json"
    path.write_text(json.dumps(document))
    return str(path)


async def test_a_job_on_the_demo_s_cards_shows_there_marked_as_a_job(
    private_state_dir: Path,
    host_pid_namespace: None,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """A job launched on the demo's simulated GPU 4 is a real process; the demo's
    job_profile lists it on that card, and the table marks it [job 1]."""
    from gputop.cli.main import main

    scenario = demo_with_own_uuids(tmp_path)
    assert main(["run", "--fake", scenario, "--gpus", "4", "--", "sleep", "60"]) == 0
    capsys.readouterr()
    try:
        app = make_app(scenario, interval_s=0.5)
        async with app.run_test(size=BIG) as pilot:
            await first_sample(pilot)
            table = app.query_one(ProcessTable)
            deadline = time.monotonic() + 30
            while not any(
                "[job 1]" in r.text(9) and r.process.physical_index == 4 for r in table.rows
            ):
                assert time.monotonic() < deadline, "the job never showed as [job 1] on GPU 4"
                await pilot.pause(0.1)
    finally:
        assert main(["jobs", "stop", "1", "--yes"]) == 0
        capsys.readouterr()
