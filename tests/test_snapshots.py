"""What a person sees: each built-in scenario at a large and a small terminal size.

Regenerate after an intended change with ``pytest tests/test_snapshots.py --snapshot-update``
and look at the SVGs (or ``make screenshots``) before committing them.
"""

from __future__ import annotations

import pytest
from dashboard_helpers import first_sample
from lab_dashboard_helpers import first_lab_sample

from gputop.tui.screenshots import LAB_HOSTS, SCENARIOS, SIZES, build_app, build_lab_app


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


@pytest.mark.parametrize("label", sorted(SIZES))
def test_lab_dashboard_looks_as_approved(snap_compare, label: str) -> None:  # type: ignore[no-untyped-def]
    """5 hosts at 160x48; 20 hosts at 80x24 (collapsed but the highlighted one)."""
    assert snap_compare(
        build_lab_app(LAB_HOSTS[label]), terminal_size=SIZES[label], run_before=first_lab_sample
    )
