"""The dashboard on a node of the real one-node Slurm cluster, NVML's side simulated: four
cards whose processes are the real Slurm jobs' processes (docs/slurm.md)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

from helpers.dashboard import first_sample
from helpers.scenarios import minimal_gpu
from helpers.slurm_cluster import GPU_COUNT, SlurmCluster
from helpers.waiting import pilot_wait_for, wait_for

from gputop.cli.main import main
from gputop.tui.app import GputopApp
from gputop.tui.screens.confirm import ConfirmScreen
from gputop.tui.screenshots import build_app
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.jobs_panel import JobsPanel
from gputop.tui.widgets.process_table import ProcessTable

BIG = (160, 48)
DEADLINE_S = 30.0
REPORT = "echo PID=$$ JOB_GPUS=$SLURM_JOB_GPUS; exec sleep 600"


def printed(output: Path) -> tuple[int, int] | None:
    text = output.read_text() if output.exists() else ""
    found = re.search(r"PID=(\d+) JOB_GPUS=(\d+)", text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def four_cards_running(pids_by_card: dict[int, int], path: Path) -> str:
    """Four simulated GPUs; on each, the process of the Slurm job that holds it."""
    gpus = [
        minimal_gpu(
            uuid=f"GPU-0000000{index}-aaaa-bbbb-cccc-00000000000{index}",
            pci_bus_id=f"00000000:0{index + 1}:00.0",
            processes=[{"pid": pids_by_card[index], "type": "C", "used_memory_mib": 100}]
            if index in pids_by_card
            else [],
        )
        for index in range(GPU_COUNT)
    ]
    document = {"driver_version": "550.127.05", "cuda_driver_version": 12040, "gpus": gpus}
    path.write_text(json.dumps(document))
    return str(path)


async def test_cards_processes_and_jobs_show_slurms_jobs_and_K_cancels_one(
    slurm: SlurmCluster, tmp_path: Path, capsys: Any, host_pid_namespace: None
) -> None:
    # Two jobs through gputop, one straight through sbatch (not gputop's).
    for name in ("first", "second"):
        assert (
            main(["run", "--slurm", "--gpus", "1", "--name", name, "--", "sh", "-c", REPORT]) == 0
        )
    outside = tmp_path / "outside.out"
    slurm.command(
        "sbatch", "--gpus=1", "--time=30", "--job-name=outside", f"--output={outside}",
        "--wrap", REPORT,
    )  # fmt: skip
    capsys.readouterr()
    state_logs = Path(os.environ["GPUTOP_STATE_DIR"]) / "logs"
    logs = lambda: sorted(state_logs.glob("slurm-*.log"))  # noqa: E731
    # before the app runs: waited for in a thread, so that the event loop never blocks
    await asyncio.to_thread(
        wait_for,
        lambda: len(logs()) == 2 and all(map(printed, logs())),
        "two gputop jobs' output",
        poll_s=0.2,
    )
    started = {path: printed(path) for path in [*logs(), outside]}
    started[outside] = await asyncio.to_thread(
        wait_for, lambda: printed(outside), "the outside job's output", poll_s=0.2
    )
    pids_by_card = {card: pid for pid, card in started.values()}
    scenario = four_cards_running(pids_by_card, tmp_path / "four.json")
    outside_pid, outside_card = started[outside]

    app: GputopApp = build_app(scenario, environ=dict(os.environ), user="root")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        grid = app.query_one(GpuGrid)
        await pilot_wait_for(
            pilot,
            lambda: "outside" in str(grid.subtitle(outside_card)),
            "the card names its Slurm job",
        )
        # at 40 columns a card's Slurm job gives way to its state (P0): cut with an ellipsis
        said = str(grid.subtitle(outside_card))
        assert re.match(r"slurm \d+ root outside (\d+h)?\d+m\d\ds( left|…) · P0$", said), said
        # in a short terminal each card is one line, with no border: the job is on the line
        await pilot.resize_terminal(100, 30)
        await pilot_wait_for(pilot, lambda: grid.card_state(outside_card).compact, "one line")
        (line,) = grid.card_lines(outside_card)
        assert re.search(r" slurm \d+ root out", line), line
        await pilot.resize_terminal(*BIG)
        await pilot_wait_for(pilot, lambda: not grid.card_state(outside_card).compact, "cards")

        table = app.query_one(ProcessTable)
        await pilot_wait_for(pilot, lambda: len(table.slurm_of_pid) == 3, "process marks")
        row = next(r for r in table.rows if r.process.pid == outside_pid)
        assert re.match(r"\[slurm \d+\] ", row.text(len(row.cells) - 1))

        panel = app.query_one(JobsPanel)
        await pilot_wait_for(pilot, lambda: panel.row_count == 3, "the outside job listed")
        keys = [str(key.value) for key in panel.rows]
        assert sum(key.startswith("slurm-") for key in keys) == 1
        gputop_jobs = [panel._jobs[key] for key in keys if not key.startswith("slurm-")]
        assert all(job.status_text == "Running on gputopnode" for job in gputop_jobs)
        assert sorted(job.physical_indices[0] for job in gputop_jobs) == sorted(
            card for path, (_, card) in started.items() if path != outside
        )

        panel.focus()
        panel.move_cursor(row=0)
        victim = panel.current_job
        assert victim is not None and victim.slurm_job_id is not None
        await pilot.press("K")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot_wait_for(
            pilot,
            lambda: panel._jobs[str(victim.id)].status_text == "Cancelled",
            "the job cancelled",
        )
