"""`gputop run --gpus 0,1 -- torchrun ddp.py` forms a real two-process gloo group.

Needs torch (CI installs the CPU build; elsewhere these skip, saying why). The cards are
simulated (v100x4); the processes, the rendezvous and the all-reduce are real.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import HELPERS
from helpers.jobs import V100, wait_until_ended
from helpers.real_components import cannot

from gputop.cli.main import main

DDP = str(HELPERS / "ddp_probe.py")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
TORCH_JOB_S = 90.0
"""How long a torchrun job may take to end: each of its processes imports torch (seconds of
CPU each), and two jobs at once start six of them, beside another test file's work."""


@pytest.fixture
def torchrun() -> str:
    if importlib.util.find_spec("torch") is None:
        cannot("torch is not installed: CI installs the CPU build (pip install torch==2.13.0)")
    if not os.access(TORCHRUN, os.X_OK):
        cannot(f"{TORCHRUN} is missing: torch's torchrun script is not installed")
    return TORCHRUN


def ranks(out_dir: Path) -> list[dict[str, Any]]:
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in (0, 1)]


def gputop_run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["run", "--fake", "v100x4", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_two_jobs_at_once_torchrun_and_the_run_module_each_start_ranks_that_all_reduce(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], torchrun: str
) -> None:
    """One job by the ``torchrun`` script on GPUs 3,1 (out of bus order), one by ``python -m
    torch.distributed.run`` on 2,0, at once: each is given a process per card, its ranks see
    their cards in the order asked, all-reduce in a group of their own, on a port of their
    own (one test, not three: each job starts three processes that import torch)."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    code, printed, _ = gputop_run(capsys, "--gpus", "3,1", "--", torchrun, DDP, str(first))
    assert code == 0
    assert "--nproc_per_node=2" in printed
    assert "local rank 0 → cuda:0 → GPU 3" in printed
    assert "local rank 1 → cuda:1 → GPU 1" in printed
    module = ["--gpus", "2,0", "--", sys.executable, "-m", "torch.distributed.run", DDP]
    code, printed, _ = gputop_run(capsys, *module, str(second))
    assert code == 0 and "-m torch.distributed.run --nproc_per_node=2 --master_port=" in printed
    for job_id in (1, 2):
        ended = wait_until_ended(state_dir, job_id, TORCH_JOB_S)
        assert ended.exit_code == 0, (state_dir / "logs" / f"{job_id}.log").read_text()
    a, b = ranks(first), ranks(second)
    assert [r["world_size"] for r in a + b] == [2] * 4
    assert [r["sum"] for r in a + b] == [3.0] * 4
    for reports, cards in ((a, (3, 1)), (b, (2, 0))):
        for report in reports:
            assert report["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(V100[i] for i in cards)
            assert report["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert sorted(r["env"]["LOCAL_RANK"] for r in reports) == ["0", "1"]
    assert a[0]["env"]["MASTER_PORT"] != b[0]["env"]["MASTER_PORT"]
