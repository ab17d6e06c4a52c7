"""A command's peak resident size, from the kernel, measured from a small process.

Linux keeps a process's peak resident size across exec, and a child forked from a pytest
worker starts with the worker's memory (CPython forks with vfork, sharing it): after a
test of 265 MB in the same worker, a command's peak read 265 MB whatever it used, and a
bound on it passed or failed by what ran before. A child of this small launcher starts
small, so its peak is its own (and that of what it waited for).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as peak:
    peak.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_with_peak(argv: Sequence[str], **run: Any) -> tuple[subprocess.CompletedProcess[Any], int]:
    """``subprocess.run(argv, **run)`` and the command's peak resident size in KiB."""
    with tempfile.TemporaryDirectory() as directory:
        peak = Path(directory) / "peak"
        done = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, str(peak), *argv], check=False, **run
        )
        return done, int(peak.read_text())
