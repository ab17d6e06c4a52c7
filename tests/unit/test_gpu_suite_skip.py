"""Without an NVIDIA driver the real-GPU suite is collected, skipped once with one clear
reason, and ``make gpu-check`` still writes its report saying nothing was checked
(docs/real-gpu.md). ``GPUTOP_GPU_CHECK_NO_DRIVER`` takes that path on any machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO

ROOT = REPO
REASON = "no NVIDIA driver: GPUTOP_GPU_CHECK_NO_DRIVER is set"


def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GPUTOP_GPU_CHECK_NO_DRIVER="1")
    env.pop("GPUTOP_GPU_REPORT_DIR", None)
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def skipped_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("SKIPPED")]


def test_the_suite_is_skipped_once_with_one_reason() -> None:
    done = run("-m", "pytest", "tests/gpu", "-p", "no:cacheprovider", "-rs", "-p", "no:xdist")
    assert done.returncode == 5, done.stdout + done.stderr  # nothing left to run: pytest's 5
    assert skipped_lines(done.stdout) == [f"SKIPPED [1] tests/gpu/test_gpu_driver.py:14: {REASON}"]
    assert "collected 0 items / 1 skipped" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_a_check_named_on_the_command_line_is_skipped_with_the_same_reason() -> None:
    done = run(
        "-m", "pytest", "tests/gpu/test_gpu_mapping.py", "tests/gpu/test_gpu_run.py",
        "-p", "no:cacheprovider", "-rs", "-p", "no:xdist",
    )  # fmt: skip
    assert done.returncode == 5, done.stdout + done.stderr
    lines = skipped_lines(done.stdout)
    assert len(lines) == 2
    assert all(line.endswith(REASON) for line in lines)


def test_gpu_check_reports_that_nothing_was_checked(tmp_path: Path) -> None:
    done = run("tests/gpu/run_check.py", "--report-dir", str(tmp_path / "report"), "-p", "no:xdist")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"gpu-check: {REASON}; nothing was checked." in done.stdout
    document = json.loads((tmp_path / "report" / "gpu-check-report.json").read_text())
    assert document["machine"]["result"] == f"nothing was checked: {REASON}"
    assert document["results"] == []
    text = (tmp_path / "report" / "gpu-check-report.md").read_text()
    assert "**Summary**: no check ran" in text
    assert f"- **driver**: {REASON}" in text
