"""The dashboard inside a Slurm allocation: the PyTorch view traces cuda:N to the node's
card Slurm gave the job (docs/slurm.md)."""

from __future__ import annotations

from helpers.dashboard import first_sample, make_app, plain_text
from textual.widgets import Static

from gputop.tui.widgets.torch_panel import TorchPanel

BIG = (160, 48)


async def test_inside_an_allocation_the_pytorch_view_explains_slurms_numbering() -> None:
    environ = {"SLURM_JOB_ID": "812", "SLURM_JOB_GPUS": "2", "CUDA_VISIBLE_DEVICES": "2"}
    app = make_app("v100x4", environ=environ)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        text = plain_text(app.query_one(TorchPanel).query_one("#torch-body", Static), 200)

    assert "Slurm job 812: SLURM_JOB_GPUS=2 (the node's GPUs)" in text
    assert "cuda:0 → GPU 2 here → the node's GPU 2" in text
    assert "its GPU 2 is cuda:0, not cuda:2" in text


async def test_outside_an_allocation_the_pytorch_view_says_nothing_of_slurm() -> None:
    app = make_app("v100x4", environ={"CUDA_VISIBLE_DEVICES": "2"})
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        text = plain_text(app.query_one(TorchPanel).query_one("#torch-body", Static), 200)

    assert "cuda:0" in text and "Slurm" not in text
