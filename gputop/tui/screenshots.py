"""Regenerate ``screenshots/``: the dashboard on the built-in scenarios, clock frozen.

``make screenshots`` runs this; the snapshot tests build their apps with ``build_app`` so
the pictures in the README and the regression tests show the very same screens.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from textual.app import App

from gputop.core import settings
from gputop.core.sampling.source import open_backend
from gputop.tui.app import GputopApp

SCENARIOS = ("demo", "v100x4", "dgx-h100", "mig", "faulty")
SIZES = {"160x48": (160, 48), "80x24": (80, 24)}
FROZEN_AT_S = "30"
SCREENSHOT_USER = "alice"
"""Whose processes show as "yours": a scenario user, so pictures match on every machine."""
A = TypeVar("A", bound=App[Any])


def build_app(
    scenario: str, *, at_s: str = FROZEN_AT_S, interval_s: float = 1.0, **options: Any
) -> GputopApp:
    """The dashboard on simulated GPUs with a frozen clock: every sample reads the same."""
    backend = open_backend(scenario, environ={settings.FAKE_TIME.name: at_s})
    options.setdefault("probes", False)
    options.setdefault("user", SCREENSHOT_USER)
    options.setdefault("environ", {})
    return GputopApp(backend, interval_s=interval_s, **options)


async def save_screenshot(
    app: A, size: tuple[int, int], path: Path, sampled: Callable[[A], bool]
) -> None:
    """``app``'s screen at ``size`` once ``sampled(app)``: sampling runs in a worker thread."""
    async with app.run_test(size=size) as pilot:
        while not sampled(app):
            await pilot.pause(0.05)
        await pilot.pause()
        app.save_screenshot(filename=path.name, path=str(path.parent))


LAB_HOSTS = {"160x48": 5, "80x24": 20}
"""The lab picture: hosts in it at each size (20 at 80x24: the small-terminal case)."""


def build_lab_app(host_count: int) -> Any:
    """The dashboard across ``host_count`` simulated hosts (gputop/tui/lab/fixed_hosts.py)."""
    from gputop.tui.lab.fixed_hosts import FixedHosts, lab_statuses
    from gputop.tui.lab.lab_app import LabApp

    statuses = lab_statuses(host_count)
    return LabApp(FixedHosts(statuses), [s.host for s in statuses], user=SCREENSHOT_USER)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", nargs="?", default="screenshots", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for scenario in SCENARIOS:
        for label, size in SIZES.items():
            path = args.out / f"{scenario}-{label}.svg"
            app = build_app(scenario)
            asyncio.run(save_screenshot(app, size, path, lambda a: a.snapshot is not None))
            print(f"wrote {path}")
    for label in SIZES:
        path = args.out / f"lab-{label}.svg"
        lab = build_lab_app(LAB_HOSTS[label])
        asyncio.run(save_screenshot(lab, SIZES[label], path, lambda a: bool(a.statuses)))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
