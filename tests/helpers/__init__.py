"""What the tests share: helpers, real components and the programs they run (docs/testing.md).

Imported as ``helpers.<module>`` (``pythonpath = ["tests"]`` in pyproject.toml); fixtures are
not imported from here by name but reach the tests through the conftest.py files.
"""

from __future__ import annotations

from pathlib import Path

HELPERS = Path(__file__).resolve().parent
"""This folder, which also holds the programs the tests run: job_probe.py, chatty_job.py,
ddp_probe.py, pid_namespace_scenario.py."""
TESTS = HELPERS.parent
"""tests/: the kinds' folders, cnvml/, gpu/, gpu_recorded/."""
REPO = TESTS.parent
"""The root of the checkout."""
