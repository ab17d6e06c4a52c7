"""A Slurm job gputop did not submit has a row of the jobs panel's every column: its words
under LAST LOG LINE, and a dash under each usage column gputop did not measure."""

from __future__ import annotations

from gputop.core.slurm.queue import SlurmJob
from gputop.tui.widgets.jobs_panel import COLUMNS, slurm_cells


def test_a_slurm_jobs_row_puts_each_text_under_its_heading() -> None:
    job = SlurmJob(812, "outside", "alice", "RUNNING", "", "gpu", "node3", (1,), 1000.0,
                   1000.0 + 3600, 60)  # fmt: skip
    row = dict(zip(COLUMNS, (cell.plain for cell in slurm_cells(job, 1090.0)), strict=True))
    assert (row["ID"], row["NAME"], row["GPUS"], row["DURATION"]) == ("S812", "outside", "1", "1m")
    assert row["GPU TIME"] == row["PEAK"] == row["SM ACT"] == "-"
    assert row["LAST LOG LINE"] == "Slurm job on node3, 58m30s left"
