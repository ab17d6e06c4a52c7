"""What ``gputop run --slurm`` is given on its command line: a mistake is a message and exit
2 before anything is submitted, never a traceback (docs/slurm.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

GPUTOP_RUN = (sys.executable, "-m", "gputop", "--fake", "demo", "run")


@pytest.mark.parametrize("gres", ["", "x", "gpu:a100:two", "gpu:\x1b]0;t\x07:1"])
def test_a_gres_that_is_no_gpu_request_is_a_usage_error_not_a_traceback(
    gres: str, tmp_path: Path
) -> None:
    # 'gputop run --slurm --gres x -- train.py' printed a Python traceback ending in
    # "gputop.core.errors.UsageError: --gres 'x' is not a GPU request" and exited 1: the
    # check raised a gputop error inside argparse, where main's handler never sees it.
    done = subprocess.run(
        [*GPUTOP_RUN, "--slurm", "--gres", gres, "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "GPUTOP_STATE_DIR": str(tmp_path / "state")},
        check=False,
    )

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "argument --gres" in done.stderr and "is not a GPU request" in done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert not (tmp_path / "state").exists()  # nothing submitted, nothing created
