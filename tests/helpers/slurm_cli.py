"""Running ``gputop`` in the Slurm tests and waiting for what Slurm reports."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import pytest

from gputop.cli.main import main

DEADLINE_S = 30.0
POLL_S = 0.2
"""How often a Slurm test asks again: each question runs Slurm's commands."""
T = TypeVar("T")


def gputop(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def jobs_json(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    code, out, _ = gputop(capsys, "jobs", "--json")
    assert code == 0
    return list(json.loads(out))


def fake_squeue_environ(tmp_path: Any, queue: dict[str, Any]) -> dict[str, str]:
    """An environment whose ``squeue`` prints ``queue`` (as ``squeue --json`` would) and whose
    ``sbatch`` says job 5, with gputop's state under ``tmp_path``: for ``gputop`` run as a
    command against answers no real Slurm gives."""
    import os

    (tmp_path / "queue.json").write_text(json.dumps(queue))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("squeue", f"cat {tmp_path / 'queue.json'}"), ("sbatch", "echo 5")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    environ = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GPUTOP_STATE_DIR": str(tmp_path / "state"),
    }
    environ.pop("GPUTOP_DEBUG", None)
    return environ
