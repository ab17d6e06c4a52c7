"""The GPU kit's ``run.sh`` on a machine without the Python its wheels are for: it says what it
found, in words (issue 40: "no python3.12 or python3 is not it"), and stops before it makes a
virtualenv (docs/real-gpu.md). The script is run from a copy, with a PATH of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

RUN_SH = REPO / "tests" / "gpu" / "kit_run.sh"
THIS_PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
WANTED = "3.99"


@pytest.fixture(name="kit")
def kit_fixture(tmp_path: Path) -> Path:
    """A kit that wants Python 3.99: its run.sh and PYTHON_VERSION alone."""
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copy(RUN_SH, kit / "run.sh")
    (kit / "PYTHON_VERSION").write_text(f"{WANTED}\n")
    return kit


def _path_with(directory: Path, *pythons: str) -> str:
    """A PATH with the tools run.sh uses and, as ``python3``, this interpreter if asked."""
    directory.mkdir()
    for tool in ("cat", "dirname"):
        found = shutil.which(tool)
        assert found is not None
        (directory / tool).symlink_to(found)
    for name in pythons:
        (directory / name).symlink_to(sys.executable)
    return str(directory)


def _run(kit: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", str(kit / "run.sh")],
        env={"PATH": path, "HOME": os.environ.get("HOME", "/"), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_a_python3_of_another_version_is_named_with_its_version(kit: Path, tmp_path: Path) -> None:
    done = _run(kit, _path_with(tmp_path / "bin", "python3"))
    assert done.returncode == 2
    first = done.stderr.splitlines()[0]
    assert first == (
        f"run.sh: this kit holds wheels for Python {WANTED}: there is no python{WANTED}, "
        f"and python3 is Python {THIS_PYTHON}."
    )
    assert "make gpu-kit KIT_PYTHON=X.Y" in done.stderr
    assert not (kit / "venv").exists()


def test_no_python_at_all_says_so(kit: Path, tmp_path: Path) -> None:
    done = _run(kit, _path_with(tmp_path / "bin"))
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        f"run.sh: this kit holds wheels for Python {WANTED}: there is no python{WANTED}, "
        "and there is no python3."
    )


def test_a_python_given_names_itself_and_its_version(kit: Path, tmp_path: Path) -> None:
    done = _run(kit, _path_with(tmp_path / "bin"), PYTHON=sys.executable)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        f"run.sh: this kit holds wheels for Python {WANTED}: PYTHON={sys.executable} "
        f"is Python {THIS_PYTHON}."
    )
    missing = tmp_path / "no-such-python"
    done = _run(kit, _path_with(tmp_path / "bin2"), PYTHON=str(missing))
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        f"run.sh: this kit holds wheels for Python {WANTED}: there is no PYTHON={missing}."
    )
