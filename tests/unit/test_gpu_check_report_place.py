"""Where ``make gpu-check`` writes its report (issue 40: it left gpu-check-report.md and .json
untracked in the clone). In a checkout a real run's report goes in
``docs/real-gpu/<date>-<machine>/``, where docs/real-gpu.md says reports are committed, so
``git status`` shows it as new files to commit; a run without a driver checked nothing, and its
report goes in ``build/gpu-check/``, which git ignores; from the kit (no checkout), here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from gpu.run_check import default_report_dir
from helpers import REPO


def _git(repo: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *argv],
        cwd=repo, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _clone_of_the_suite(tmp_path: Path) -> Path:
    """A git checkout holding the suite and gputop's .gitignore, all committed."""
    repo = tmp_path / "clone"
    shutil.copytree(REPO / "tests" / "gpu", repo / "tests" / "gpu")
    shutil.copy(REPO / ".gitignore", repo / ".gitignore")
    assert _git(repo, "init", "-q").returncode == 0
    assert _git(repo, "add", "-A").returncode == 0
    assert _git(repo, "commit", "-q", "-m", "suite").returncode == 0
    return repo


def test_a_run_without_a_driver_leaves_git_status_clean(tmp_path: Path) -> None:
    repo = _clone_of_the_suite(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "GPUTOP_GPU_REPORT_DIR"}
    done = subprocess.run(
        [sys.executable, str(repo / "tests" / "gpu" / "run_check.py"), "-p", "no:xdist"],
        env={**env, "GPUTOP_GPU_CHECK_NO_DRIVER": "1"},
        cwd=repo, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = repo / "build" / "gpu-check" / "gpu-check-report.md"
    assert report.exists()
    assert f"report in {report}" in done.stdout
    assert _git(repo, "status", "--porcelain").stdout == ""  # nothing left untracked


def test_a_real_runs_report_goes_where_the_guide_says_and_git_shows_it() -> None:
    place = default_report_dir(REPO, driver_present=True, day="2026-12-01", machine="dgx-07")
    assert place == REPO / "docs" / "real-gpu" / "2026-12-01-dgx-07"
    ignored = _git(REPO, "check-ignore", "-q", str(place / "gpu-check-report.md"))
    assert ignored.returncode == 1  # not ignored: git status shows it, to be committed
    scratch = default_report_dir(REPO, driver_present=False, day="2026-12-01", machine="x")
    assert _git(REPO, "check-ignore", "-q", str(scratch / "gpu-check-report.md")).returncode == 0


def test_from_the_kit_the_report_goes_in_the_current_directory(tmp_path: Path) -> None:
    kit_suite = tmp_path / "gputop-gpu-kit" / "suite"  # no .git: not a checkout
    assert default_report_dir(kit_suite, driver_present=True, day="d", machine="m") == Path(".")


def test_make_gpu_check_leaves_the_place_to_the_suite() -> None:
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "gpu-check"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "tests/gpu/run_check.py" in done.stdout
    assert "--report-dir" not in done.stdout
