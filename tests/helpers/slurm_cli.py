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
