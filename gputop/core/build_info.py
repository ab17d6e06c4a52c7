"""Which gputop this is: the distribution, its version and, in a git checkout, the commit.

Read only for ``gputop --version``. The commit is read from the checkout's files (HEAD, the
ref it names, packed-refs; a worktree's ``.git`` file points to its git directory), never by
running git, and anything unreadable means "no commit", never an error.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from gputop import DISTRIBUTION, __version__

_SHA = re.compile(r"^[0-9a-f]{40}$")


def distribution_version() -> str:
    """The installed distribution's version; the package's own where it is not installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return __version__


def version_line(package_dir: Path | None = None) -> str:
    """``gputop-dash 0.1.0`` and, from a git checkout, ``(commit 3c5da60)``."""
    here = Path(__file__).resolve().parents[1] if package_dir is None else package_dir
    line = f"{DISTRIBUTION} {distribution_version()}"
    commit = checkout_commit(here.parent)
    return line if commit is None else f"{line} (commit {commit[:12]})"


def checkout_commit(root: Path) -> str | None:
    """The commit checked out at ``root``, or None where ``root`` is not a git checkout."""
    try:
        git_dir = _git_dir(root)
        if git_dir is None:
            return None
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if _SHA.match(head):
            return head
        if not head.startswith("ref: "):
            return None
        return _resolve_ref(git_dir, head[len("ref: ") :].strip())
    except (OSError, UnicodeDecodeError):
        return None


def _git_dir(root: Path) -> Path | None:
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():  # a worktree or submodule: "gitdir: PATH"
        text = dot_git.read_text(encoding="utf-8").strip()
        if text.startswith("gitdir: "):
            target = Path(text[len("gitdir: ") :])
            return target if target.is_absolute() else root / target
    return None


def _resolve_ref(git_dir: Path, ref: str) -> str | None:
    if not ref.startswith("refs/") or ".." in ref.split("/"):
        return None
    common = git_dir
    commondir = git_dir / "commondir"  # a worktree keeps its branches in the main git dir
    if commondir.is_file():
        common = git_dir / commondir.read_text(encoding="utf-8").strip()
    for directory in (git_dir, common):
        loose = directory / ref
        if loose.is_file():
            value = loose.read_text(encoding="utf-8").strip()
            return value if _SHA.match(value) else None
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            sha, _, name = line.partition(" ")
            if name == ref and _SHA.match(sha):
                return sha
    return None
