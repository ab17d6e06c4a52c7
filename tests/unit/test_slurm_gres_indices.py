"""Slurm's per-node GRES (``squeue --json``'s ``gres_detail``, ``gpu:a100:2(IDX:0,2-3)``) is
another machine's text (the controller's). An index of 5,000 digits ended ``gputop jobs`` in
an internal error (int()'s digit limit), 20,000 ranges took seconds, and Unicode digits
(``٣``) were read as card 3. Only ASCII digits of card indices are read, within a bound."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.slurm_cli import fake_squeue_environ

from gputop.core.slurm.queue import parse_gpu_indices


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        ("gpu:a100:2(IDX:0,2-3)", (0, 2, 3)),
        ("gpu:a100:1(IDX:" + "9" * 5000 + ")", ()),
        ("gpu:a100:1(IDX:0-" + "9" * 5000 + ")", ()),
        ("gpu:a100:1(IDX:٣)", ()),
        ("gpu:a100:1(IDX:²-３)", ()),
        ("gpu:a100:1(IDX:7)", (7,)),
    ],
    ids=["ordinary", "5000-digits", "5000-digit-end", "arabic-digit", "super-and-wide", "seven"],
)
def test_only_ascii_card_indices_are_read(detail: str, expected: tuple[int, ...]) -> None:
    # before: ValueError (Exceeds the limit (4300 digits)); (3,) for the Arabic-Indic three
    assert parse_gpu_indices([detail]) == expected


def test_twenty_thousand_ranges_cost_no_more_than_a_card_list() -> None:
    detail = "gpu:a100:8(IDX:" + ",".join(["0-1024"] * 20_000) + ")"
    started = time.process_time()
    indices = parse_gpu_indices([detail])
    # before: 2.1 s, 20 million indices listed
    assert time.process_time() - started < 0.5
    assert indices == tuple(range(1025))


def test_gputop_jobs_survives_a_5000_digit_index_from_squeue(tmp_path: Path) -> None:
    job = {
        "job_id": 5,
        "name": "x",
        "job_state": "RUNNING",
        "user_name": "root",
        "nodes": "vm",
        "gres_detail": ["gpu:a100:1(IDX:" + "9" * 5000 + ")"],
    }
    environ = fake_squeue_environ(tmp_path, {"jobs": [job]})
    gputop = [sys.executable, "-m", "gputop"]
    submitted = subprocess.run(
        [*gputop, "run", "--slurm", "--gpus", "1", "--", "python", "x.py"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    listed = subprocess.run(
        [*gputop, "jobs"], capture_output=True, text=True, env=environ, timeout=60
    )
    # before: exit 70, "internal error: ValueError: Exceeds the limit (4300 digits)"
    assert listed.returncode == 0, listed.stderr
    assert "internal error" not in listed.stderr
    assert " x.py " in listed.stdout
