"""Code points people to the project's own docs/, which exist, and never outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import REPO

ROOT = REPO
OUTSIDE = re.compile(r"\.\./shared|shared/(spec|research)|CVD_RULES|spec/scenario\.md")


def _sources() -> list[Path]:
    return [*(ROOT / "gputop").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]


def test_every_docs_file_the_code_names_exists() -> None:
    named = {
        match
        for path in _sources()
        for match in re.findall(r"docs/[\w.-]+\.md", path.read_text(encoding="utf-8"))
    }
    assert named, "the code names its docs"
    assert sorted(name for name in named if not (ROOT / name).is_file()) == []


def test_no_code_points_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in _sources()
        if path.resolve() != this
        for match in OUTSIDE.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == []
