"""What ``gputop run --slurm`` is given on its command line: a mistake is a message and exit
2 before anything is submitted, never a traceback (docs/slurm.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.jobs import run_cli


@pytest.mark.parametrize("gres", ["", "x", "gpu:a100:two", "gpu:\x1b]0;t\x07:1"])
def test_a_gres_that_is_no_gpu_request_is_a_usage_error_not_a_traceback(
    gres: str, tmp_path: Path
) -> None:
    # 'gputop run --slurm --gres x -- train.py' printed a Python traceback ending in
    # "gputop.core.errors.UsageError: --gres 'x' is not a GPU request" and exited 1: the
    # check raised a gputop error inside argparse, where main's handler never sees it.
    done = run_cli(
        "--fake",
        "demo",
        "run",
        "--slurm",
        "--gres",
        gres,
        "--",
        "true",
        env={"PATH": "/usr/bin:/bin", "GPUTOP_STATE_DIR": str(tmp_path / "state")},
    )

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "argument --gres" in done.stderr and "is not a GPU request" in done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert not (tmp_path / "state").exists()  # nothing submitted, nothing created
