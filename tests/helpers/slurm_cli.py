"""Running ``gputop`` in the Slurm tests and waiting for what Slurm reports."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from gputop.cli.main import main

DEADLINE_S = 30.0
T = TypeVar("T")


def gputop(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def wait_for(what: str, check: Callable[[], T | None]) -> T:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def jobs_json(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    code, out, _ = gputop(capsys, "jobs", "--json")
    assert code == 0
    return list(json.loads(out))
