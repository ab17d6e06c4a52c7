"""The binding gputop imports as ``pynvml`` must be nvidia-ml-py's, or a person is told why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pynvml

from gputop.core.sampling.source import binding_problem

SHADOW = """
NVML_SUCCESS = 0
class NVMLError(Exception):
    pass
def nvmlInit():
    raise AssertionError("the shadowing package must not be initialised")
"""


def test_nvidia_ml_py_itself_is_accepted() -> None:
    assert binding_problem(pynvml) is None


def test_a_shadowing_pynvml_package_is_named_with_the_fix(tmp_path: Path) -> None:
    # The deprecated 'pynvml' package installs a pynvml/ directory, which Python prefers.
    package = tmp_path / "pynvml"
    package.mkdir()
    (package / "__init__.py").write_text(SHADOW)
    script = (
        "import sys\n"
        "from gputop.core.errors import NvmlUnavailableError\n"
        "from gputop.core.sampling.source import open_backend\n"
        "try:\n"
        "    open_backend(environ={})\n"
        "except NvmlUnavailableError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "shadowing nvidia-ml-py" in result.stdout, result.stderr
    assert "pip uninstall pynvml" in result.stdout
    assert str(package / "__init__.py") in result.stdout
