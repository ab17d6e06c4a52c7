"""What a person sees: each built-in scenario at a large and a small terminal size.

Regenerate after an intended change with ``pytest tests/test_snapshots.py --snapshot-update``
and look at the SVGs (or ``make screenshots``) before committing them.
"""

from __future__ import annotations

import pytest
from dashboard_helpers import first_sample

from gputop.tui.screenshots import SCENARIOS, SIZES, build_app


@pytest.mark.parametrize("label", sorted(SIZES))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_dashboard_looks_as_approved(snap_compare, scenario: str, label: str) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(build_app(scenario), terminal_size=SIZES[label], run_before=first_sample)


def test_selection_and_launch_preview_look_as_approved(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(
        build_app("mixed"),
        press=["right", "space", "right", "right", "space"],
        terminal_size=SIZES["160x48"],
        run_before=first_sample,
    )
