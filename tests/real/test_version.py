"""``gputop --version``: the distribution, its version and, from a git checkout, the commit,
read from the checkout's files (gputop/core/build_info.py), checked against git itself."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from helpers.real_components import cannot

from gputop import DISTRIBUTION, __version__
from gputop.core.build_info import checkout_commit, version_line

ROOT = REPO


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        cannot("git is not installed (Debian: apt-get install git)")
    repo = tmp_path / "clone"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "file").write_text("one\n")
    git("add", "file", cwd=repo)
    git("commit", "-q", "-m", "one", cwd=repo)
    return repo


def test_the_commit_of_a_branch_checkout_is_gits_own(repository: Path) -> None:
    assert checkout_commit(repository) == git("rev-parse", "HEAD", cwd=repository)


def test_a_packed_branch_is_found_in_packed_refs(repository: Path) -> None:
    git("pack-refs", "--all", cwd=repository)
    assert not (repository / ".git" / "refs" / "heads" / "main").exists()

    assert checkout_commit(repository) == git("rev-parse", "HEAD", cwd=repository)


def test_a_detached_head_is_its_commit(repository: Path) -> None:
    first = git("rev-parse", "HEAD", cwd=repository)
    (repository / "file").write_text("two\n")
    git("commit", "-q", "-am", "two", cwd=repository)
    git("checkout", "-q", first, cwd=repository)

    assert checkout_commit(repository) == first


def test_a_worktree_finds_its_branch_through_its_git_file(repository: Path) -> None:
    worktree = repository.parent / "worktree"
    git("worktree", "add", "-q", "-b", "side", str(worktree), cwd=repository)
    (worktree / "file").write_text("side\n")
    git("commit", "-q", "-am", "side", cwd=worktree)

    commit = checkout_commit(worktree)

    assert commit == git("rev-parse", "HEAD", cwd=worktree)
    assert commit != git("rev-parse", "HEAD", cwd=repository)


def test_a_directory_that_is_no_checkout_has_no_commit(tmp_path: Path) -> None:
    assert checkout_commit(tmp_path) is None


def test_a_head_naming_a_file_outside_the_refs_has_no_commit(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "outside").write_text("0123456789" * 4 + "\n")
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/../../outside\n")

    assert checkout_commit(tmp_path) is None


def test_an_unreadable_head_has_no_commit_and_no_error(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_bytes(b"\xff\xfe not text")

    assert checkout_commit(tmp_path) is None


def test_version_line_names_the_distribution_and_the_commit(repository: Path) -> None:
    package = repository / "gputop"
    package.mkdir()
    commit = git("rev-parse", "HEAD", cwd=repository)

    line = version_line(package)

    assert line.startswith(f"{DISTRIBUTION} ")
    assert line.endswith(f"(commit {commit[:12]})")


def test_gputop_version_from_this_checkout_prints_its_commit() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not run from a git checkout")
    done = subprocess.run(
        [sys.executable, "-m", "gputop", "--version"], capture_output=True, text=True, check=True
    )
    head = git("rev-parse", "HEAD", cwd=ROOT)

    assert done.stdout == f"{DISTRIBUTION} {__version__} (commit {head[:12]})\n"
