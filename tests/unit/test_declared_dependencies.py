"""Every third-party module gputop (or its test suite) imports is a declared dependency.

A module that arrives only as a dependency of a dependency (``rich`` through Textual) works
until that dependency stops needing it; declaring it makes the floor ours to choose.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from helpers import REPO

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef,unused-ignore]

ROOT = REPO
# Imported only where present, with a message saying what to install (never a hard need);
# the real-GPU suite's CUDA process uses CuPy where it is there (docs/real-gpu.md).
OPTIONAL = {"torch", "cupy"}
# Run by another interpreter, never this one: make bench's nvitop runs in its own virtualenv
# (tests/bench/nvitop_on_fake.py, NVITOP_PYTHON); waitress, the server the exporter's flood
# bench compares with, from a directory given to it (tests/bench/exporter_flood_bench.py).
ELSEWHERE = {"nvitop", "waitress"}


def _imported_top_level(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def _third_party(names: set[str], local: set[str]) -> set[str]:
    return {n for n in names if n not in sys.stdlib_module_names and n not in local} - OPTIONAL


def _declared(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in requirements}


def _distribution(module: str) -> str:
    found = packages_distributions().get(module)
    if not found:
        pytest.fail(f"{module} is imported but not installed by any distribution")
    return found[0].lower()


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_every_module_gputop_imports_is_a_runtime_dependency() -> None:
    project = _project()
    declared = _declared(project["dependencies"])
    modules = _third_party(_imported_top_level(ROOT / "gputop"), {"gputop", "tomli"})
    undeclared = sorted(m for m in modules if _distribution(m) not in declared)
    assert undeclared == []
    assert any(r.startswith("tomli") for r in project["dependencies"])  # Python 3.10


def test_every_module_the_tests_import_is_a_runtime_or_dev_dependency() -> None:
    project = _project()
    declared = _declared(project["dependencies"] + project["optional-dependencies"]["dev"])
    local = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {
        p.name for p in (ROOT / "tests").iterdir() if p.is_dir()
    }
    modules = _third_party(_imported_top_level(ROOT / "tests"), local | {"gputop", "tomli"})
    modules -= ELSEWHERE
    undeclared = sorted(m for m in modules if _distribution(m) not in declared)
    assert undeclared == []
