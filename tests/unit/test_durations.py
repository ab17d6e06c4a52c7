"""One notation for elapsed time (docs/units.md): exact in the CLI, one unit shorter on screen."""

from __future__ import annotations

import pytest

from gputop.core.units import NA, duration, duration_coarse


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (42.9, "42s"), (3 * 60 + 7, "3m07s"), (3 * 3600 + 12 * 60 + 5, "3h12m05s")],
)
def test_the_cli_writes_elapsed_time_to_the_second_with_its_units(
    seconds: float, text: str
) -> None:
    assert duration(seconds) == text


def test_the_cli_writes_days_to_the_minute() -> None:
    assert duration(2 * 86400 + 4 * 3600 + 5 * 60 + 9) == "2d04h05m"


@pytest.mark.parametrize("seconds", [38, 38 * 60, 5 * 3600 + 20 * 60 + 37, 21 * 86400 + 5])
def test_the_screen_shows_the_cli_s_notation_one_unit_shorter(seconds: float) -> None:
    """Never ambiguous: "held 0:38" could be seconds or minutes; 38s and 38m cannot."""
    exact, coarse = duration(seconds), duration_coarse(seconds, seconds_below_minute=True)
    assert exact.startswith(coarse)


@pytest.mark.parametrize(("seconds", "text"), [(38.6, "38s"), (0.9, "0s"), (59.7, "59s")])
def test_the_screen_and_the_cli_agree_on_a_fraction_of_a_second(seconds: float, text: str) -> None:
    """Both truncate: a job 38.6 s old is 38s in the jobs panel, in `gputop jobs` and its log
    (never 39s on one and 38s on the other, nor 60s below a minute)."""
    assert duration(seconds) == text
    assert duration_coarse(seconds, seconds_below_minute=True) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "<1m"),
        (59, "<1m"),
        (60, "1m"),
        (3 * 60 + 59, "3m"),
        (5 * 3600 + 21 * 60, "5h21m"),
        (52 * 3600, "2d04h"),
    ],
)
def test_the_dashboard_shows_elapsed_time_to_the_minute(seconds: float, text: str) -> None:
    """To the minute, and a first minute as under one, never "0m" (a process just started,
    a throttle that just began)."""
    assert duration_coarse(seconds) == text


def test_a_young_job_shows_its_seconds_until_its_first_minute() -> None:
    assert duration_coarse(42.4, seconds_below_minute=True) == "42s"
    assert duration_coarse(61, seconds_below_minute=True) == "1m"


@pytest.mark.parametrize("seconds", [None, -1.0])
def test_an_unknown_or_negative_duration_is_not_available(seconds: float | None) -> None:
    assert duration(seconds) == NA
    assert duration_coarse(seconds) == NA
