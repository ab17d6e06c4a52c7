"""Enter on a GPU process: its own CUDA view, its rank and its job's ranks, from real processes.

The cards are simulated (a scenario naming the pids of real processes started here with
the variables a DDP rank gets); the environments are read from /proc as on a real machine.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.cuda_view import UUIDS
from helpers.dashboard import first_sample, make_app, plain_text
from helpers.scenarios import minimal_gpu
from textual.widgets import Static

from gputop.tui.screens.process_detail import ProcessDetailScreen
from gputop.tui.widgets.process_table import ProcessTable

BIG = (160, 48)


def cards(processes: dict[int, list[tuple[int, int]]]) -> list[dict[str, Any]]:
    """Four cards; ``processes[index]``: (pid, MiB) that NVML shows on it."""
    return [
        minimal_gpu(
            uuid=UUIDS[index],
            pci_bus_id=f"00000000:0{index + 1}:00.0",
            processes=[
                {"pid": pid, "used_memory_mib": mib, "type": "C"}
                for pid, mib in processes.get(index, [])
            ],
        )
        for index in range(4)
    ]


async def test_enter_on_a_rank_shows_its_cuda_view_and_its_jobs_ranks_with_their_memory(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
) -> None:
    pinned = f"{UUIDS[3]},{UUIDS[1]}"
    common = {"CUDA_VISIBLE_DEVICES": pinned, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    common |= {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "41234"}
    rank0 = start_process(RANK="0", LOCAL_RANK="0", **common)
    rank1 = start_process(RANK="1", LOCAL_RANK="1", **common)
    stray = start_process(CUDA_VISIBLE_DEVICES=UUIDS[2])
    scenario = scenario_file(
        cards({3: [(rank0.pid, 3000)], 1: [(rank1.pid, 2000)], 0: [(stray.pid, 1000)]})
    )
    app = make_app(scenario)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        assert [row.process.pid for row in table.rows] == [rank0.pid, rank1.pid, stray.pid]
        assert "[rank 0/2]" in table.rows[0].text(9)
        assert "[not its cuda card]" in table.rows[2].text(9)
        table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProcessDetailScreen)
        detail = plain_text(app.screen.query_one("#process-detail", Static), width=200)
        assert f"PID {rank0.pid}" in detail
        assert "CUDA_VISIBLE_DEVICES=" + pinned in detail
        assert "cuda:0 → GPU 3" in detail and "cuda:1 → GPU 1" in detail
        assert "rank 0 of 2, local rank 0, rendezvous 127.0.0.1:41234" in detail
        assert "Its job: 2 ranks here, 4.9G GPU memory" in detail
        assert "excludes" not in detail
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ProcessDetailScreen)
        await pilot.press("end", "enter")
        await pilot.pause()
        detail = plain_text(app.screen.query_one("#process-detail", Static), width=200)
        assert "NVML shows it on GPU 0, which its own CUDA_VISIBLE_DEVICES excludes" in detail


async def test_a_jobs_ranks_stay_together_and_r_collapses_them_into_one_line_with_its_memory(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
) -> None:
    common = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "41234"}
    rank0 = start_process(RANK="0", **common)
    rank1 = start_process(RANK="1", **common)
    other = start_process()
    # By GPU memory the other process would come between the two ranks.
    scenario = scenario_file(
        cards({0: [(rank1.pid, 2000)], 1: [(other.pid, 2500)], 2: [(rank0.pid, 3000)]})
    )
    app = make_app(scenario)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        assert [row.process.pid for row in table.rows] == [rank0.pid, rank1.pid, other.pid]
        table.focus()
        await pilot.press("r")
        (summary, rest) = table.rows
        assert rest.process.pid == other.pid
        assert summary.text(0) == "2,0" and summary.text(1) == "▸ 2 ranks"
        assert summary.text(4) == "4.9G"
        assert summary.text(9).startswith("[ranks of 127.0.0.1:41234] ")
        assert table.current_process is None  # t/T never act on a whole job's line
        await pilot.press("enter")  # enter on the job's line opens it again
        assert [row.process.pid for row in table.rows] == [rank0.pid, rank1.pid, other.pid]


async def test_enter_names_the_gputop_job_a_process_belongs_to_never_a_forged_slurm_job(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    state_dir: Path,
) -> None:
    """As the README says: the detail names the process's job, read from its environment
    (``GPUTOP_JOB_ID``: gputop/core/process_jobs.py), with the name of a gputop job the
    dashboard lists. ``SLURM_JOB_ID`` alone, which anyone may set, names no Slurm job where
    no Slurm says the job is the process's owner's (it did on the old code)."""
    from helpers.hostile import add_job

    job = add_job("resnet-sweep", ["python", "train.py"])
    in_job = start_process(GPUTOP_JOB_ID=str(job.id))
    in_slurm = start_process(SLURM_JOB_ID="4242")
    alone = start_process()
    scenario = scenario_file(
        cards({0: [(in_job.pid, 3000)], 1: [(in_slurm.pid, 2000)], 2: [(alone.pid, 1000)]})
    )
    app = make_app(scenario)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        table.focus()

        async def detail_of(row: int) -> str:
            return await _detail_of(app, pilot, row, "#process-detail", "#detail-jobs")

        assert f"gputop job {job.id} (resnet-sweep)" in await detail_of(0)
        assert "Slurm job" not in await detail_of(1)
        alone_said = await detail_of(2)
        assert "gputop job" not in alone_said and "Slurm job" not in alone_said


async def test_the_detail_proves_a_slurm_job_as_the_process_table_does(
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    monkeypatch: Any,
    tmp_path: Path,
) -> None:
    """The detail reads the process's own ``/proc`` for its jobs, with the Slurm users the
    dashboard last read (squeue's ``user_id``), as its process table does
    (gputop/core/slurm/cgroup.py). It read with none: a process's own Slurm job
    (``SLURM_JOB_ID`` of a job Slurm runs as its owner) was not named, and a cgroup v1
    ``/slurm/uid_U/job_M`` (a hierarchy v1 may hand user U) named job M though Slurm runs
    M as another user: both on the old code."""
    import os

    from gputop.core import process_jobs
    from gputop.core.slurm.watch import SlurmView
    from gputop.tui.app import SlurmRead
    from gputop.tui.screens import process_detail

    owner = os.getuid()
    mine = start_process(SLURM_JOB_ID="4242")
    forged = start_process()
    forged_proc = tmp_path / "proc" / str(forged.pid)  # its cgroup: Slurm's v1 hierarchy
    forged_proc.mkdir(parents=True)
    (forged_proc / "status").write_text(f"Name:\tpython\nUid:\t{owner}\t{owner}\t{owner}\t0\n")
    (forged_proc / "cgroup").write_text(f"4:memory:/slurm/uid_{owner}/job_77/step_0\n")
    (forged_proc / "environ").write_bytes(b"PATH=/usr/bin\0")
    read = process_jobs.read_process_jobs

    def read_process_jobs(directory: Path, job_users: Any = None) -> process_jobs.ProcessJobs:
        return read(forged_proc if directory.name == str(forged.pid) else directory, job_users)

    monkeypatch.setattr(process_detail, "read_process_jobs", read_process_jobs)
    app = make_app(scenario_file(cards({0: [(mine.pid, 3000)], 1: [(forged.pid, 2000)]})))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        app.slurm_watch = None  # Slurm's word is the one posted below
        app.post_message(SlurmRead(SlurmView(node="n1", job_users={4242: owner, 77: owner + 1})))
        await pilot.pause()
        table = app.query_one(ProcessTable)
        assert table.slurm_of_pid == {}  # what the detail names it proves itself
        table.focus()

        async def detail_of(row: int) -> str:
            return await _detail_of(app, pilot, row, "#detail-jobs")

        assert "In Slurm job 4242" in await detail_of(0)
        assert "Slurm job" not in await detail_of(1)


async def _detail_of(app: Any, pilot: Any, row: int, *panes: str) -> str:
    """Enter on the table's row ``row``; what the detail's ``panes`` say once it has read the
    process's jobs; then escape."""
    from helpers.waiting import pilot_wait_for

    await pilot.press("home", *["down"] * row, "enter")
    await pilot_wait_for(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
    screen = app.screen
    assert isinstance(screen, ProcessDetailScreen)
    await pilot_wait_for(pilot, lambda: screen.jobs_read, "the process's jobs read")
    await pilot.pause()
    said = "".join(plain_text(screen.query_one(pane, Static), width=200) for pane in panes)
    await pilot.press("escape")
    await pilot_wait_for(pilot, lambda: not isinstance(app.screen, ProcessDetailScreen))
    return said
