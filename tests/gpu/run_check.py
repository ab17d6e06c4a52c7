"""``make gpu-check`` and the kit's run.sh: the real-GPU suite, then where its report is.

    python tests/gpu/run_check.py [--report-dir DIR] [PYTEST ARGS...]

Runs pytest on this folder with ``GPUTOP_GPU_REPORT_DIR`` set, so the session writes
``gpu-check-report.md`` and ``.json`` there; exits with pytest's status. Without an NVIDIA
driver every check is skipped with the reason, said once here too (docs/real-gpu.md).
Without ``--report-dir`` the report goes where ``default_report_dir`` says.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from gpu.driver import DRIVER  # noqa: E402
from gputop.core.safe_text import clean  # noqa: E402

NO_TESTS_COLLECTED = 5
CHECKOUT = HERE.parent.parent
"""The checkout's root, or in the kit its ``suite`` folder (no ``.git`` there)."""


def default_report_dir(root: Path, *, driver_present: bool, day: str, machine: str) -> Path:
    """Where the report goes without ``--report-dir``. In a checkout a real run's goes in
    ``docs/real-gpu/<day>-<machine>/``, where docs/real-gpu.md keeps every run's, committed
    (``git status`` shows it, to be committed); a run without a driver checked nothing, and
    its report goes in ``build/gpu-check/``, which git ignores, so no clone is left with
    files nobody meant to add. From the kit (no checkout): the current directory."""
    if not (root / ".git").exists():
        return Path(".")
    if driver_present:
        return root / "docs" / "real-gpu" / f"{day}-{machine}"
    return root / "build" / "gpu-check"


def _machine() -> str:
    """This machine's short name, in the characters a folder name keeps: ``dgx-07``."""
    name = re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname().split(".")[0]).strip("-")
    return name or "machine"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--report-dir",
        default=None,
        help="where the report goes (default: in a checkout docs/real-gpu/DATE-MACHINE, or "
        "build/gpu-check without a driver; from the kit, here)",
    )
    args, pytest_args = parser.parse_known_args(argv)
    if args.report_dir is None:
        day = time.strftime("%Y-%m-%d")
        place = default_report_dir(
            CHECKOUT, driver_present=DRIVER.present, day=day, machine=_machine()
        )
    else:
        place = Path(args.report_dir)
    report = place.resolve()
    env = dict(os.environ)
    env["GPUTOP_GPU_REPORT_DIR"] = str(report)
    # --confcutdir: from a checkout as from the kit, only this folder's conftest.py.
    command = [sys.executable, "-m", "pytest", str(HERE), "-p", "no:cacheprovider", "-v"]
    command += ["-rs", "--confcutdir", str(HERE), *pytest_args]
    status = subprocess.run(command, env=env, cwd=HERE.parent.parent, check=False).returncode
    if not DRIVER.present:
        print(f"gpu-check: {clean(DRIVER.reason)}; nothing was checked.")
        if status == NO_TESTS_COLLECTED:  # the one module skipped at collection: that is all
            status = 0
    print(f"gpu-check: report in {clean(str(report / 'gpu-check-report.md'))} (and .json)")
    if args.report_dir is None and DRIVER.present and (CHECKOUT / ".git").exists():
        print("gpu-check: commit it, and add its row to the table in docs/real-gpu.md.")
    return status


if __name__ == "__main__":
    sys.exit(main())
