"""Which of some modules a fresh interpreter has loaded once the dashboard's modules are
imported, as at its start: the tests that keep a module out of the start until it is used
(docs/speed.md, "The first frame")."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

DASHBOARD_MODULES = "gputop.cli.dashboard, gputop.tui.app, gputop.core.sampling.source"


def loaded_at_start(modules: Sequence[str], parse: Sequence[str] | None = None) -> list[str]:
    """The ``modules`` loaded after importing the dashboard's, in a fresh interpreter;
    ``parse``: a command line parsed first, as ``gputop`` does."""
    parsing = (
        f"from gputop.cli.main import _parse\n_parse({list(parse)!r})\n"
        if parse is not None
        else ""
    )
    code = (
        f"import sys\n{parsing}import {DASHBOARD_MODULES}\n"
        f"print(','.join(m for m in {tuple(modules)!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1:] or [""]
    return [name for name in last[0].split(",") if name]
