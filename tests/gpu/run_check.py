"""``make gpu-check`` and the kit's run.sh: the real-GPU suite, then where its report is.

    python tests/gpu/run_check.py [--report-dir DIR] [PYTEST ARGS...]

Runs pytest on this folder with ``GPUTOP_GPU_REPORT_DIR`` set, so the session writes
``gpu-check-report.md`` and ``.json`` there; exits with pytest's status. Without an NVIDIA
driver every check is skipped with the reason, said once here too (docs/real-gpu.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from gpu.driver import DRIVER  # noqa: E402
from gputop.core.safe_text import clean  # noqa: E402

NO_TESTS_COLLECTED = 5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report-dir", default=".", help="where the report goes (default .)")
    args, pytest_args = parser.parse_known_args(argv)
    report = Path(args.report_dir).resolve()
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
    return status


if __name__ == "__main__":
    sys.exit(main())
