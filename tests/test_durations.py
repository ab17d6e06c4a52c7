"""One duration formatter for the whole project: ps style in the CLI, coarse on screen."""

from __future__ import annotations

import pytest

from gputop.core.units import NA, duration, duration_coarse


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0:00"), (42.9, "0:42"), (3 * 60 + 7, "3:07"), (3 * 3600 + 12 * 60 + 5, "3:12:05")],
)
def test_the_cli_writes_elapsed_time_as_ps_does(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_the_cli_writes_days_before_a_dash_as_ps_does() -> None:
    assert duration(2 * 86400 + 4 * 3600) == "2-04:00:00"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(59, "0m"), (3 * 60 + 59, "3m"), (5 * 3600 + 21 * 60, "5h21m"), (52 * 3600, "2d04h")],
)
def test_the_dashboard_shows_elapsed_time_to_the_minute(seconds: float, text: str) -> None:
    assert duration_coarse(seconds) == text


def test_a_young_job_shows_its_seconds_until_its_first_minute() -> None:
    assert duration_coarse(42.4, seconds_below_minute=True) == "42s"
    assert duration_coarse(61, seconds_below_minute=True) == "1m"


@pytest.mark.parametrize("seconds", [None, -1.0])
def test_an_unknown_or_negative_duration_is_not_available(seconds: float | None) -> None:
    assert duration(seconds) == NA
    assert duration_coarse(seconds) == NA
