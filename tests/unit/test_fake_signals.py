"""Signals: how a scenario's readings move over time, and how a bad one is reported."""

from __future__ import annotations

from typing import Any

import pytest

from gputop.core.errors import ScenarioError
from gputop.core.fake.signals import Signal

FIELD = "gpus[1].utilization_gpu"


def parse(value: Any, field: str = FIELD) -> Signal:
    return Signal.from_json(value, path="lab.json", field=field)


def test_a_number_is_a_constant() -> None:
    signal = parse(42)
    assert [signal.value_at(t) for t in (0, 1.5, 1000)] == [42, 42, 42]


def test_amp_adds_a_sine_of_that_period() -> None:
    signal = parse({"base": 60, "amp": 30, "period": 20})
    assert signal.value_at(0) == pytest.approx(60)
    assert signal.value_at(5) == pytest.approx(90)
    assert signal.value_at(15) == pytest.approx(30)
    assert signal.value_at(20) == pytest.approx(60)


def test_phase_is_a_fraction_of_the_period() -> None:
    signal = parse({"base": 0, "amp": 1, "period": 8, "phase": 0.25})
    assert signal.value_at(0) == pytest.approx(1)


def test_waves_add_extra_sines_with_their_own_period_and_phase() -> None:
    signal = parse({"base": 10, "waves": [[2, 4, 0.25], [3, 12]]})
    assert signal.value_at(0) == pytest.approx(12)
    assert signal.value_at(3) == pytest.approx(10 + 2 * 0 + 3 * 1)


def test_value_is_clamped_to_min_and_max() -> None:
    signal = parse({"base": 50, "amp": 100, "period": 4, "min": 0, "max": 100})
    assert signal.value_at(1) == 100
    assert signal.value_at(3) == 0


def test_jitter_stays_within_its_size() -> None:
    signal = parse({"base": 50, "jitter": 5})
    values = [signal.value_at(t / 4) for t in range(400)]
    assert all(45 <= v <= 55 for v in values)
    assert len(set(values)) > 10


def test_jitter_holds_still_for_one_jitter_period() -> None:
    signal = parse({"base": 50, "jitter": 5, "jitter_period": 2})
    assert signal.value_at(4.0) == signal.value_at(4.9) == signal.value_at(5.99)


def test_jitter_is_the_same_for_the_same_field_at_the_same_time() -> None:
    first = parse({"base": 50, "jitter": 5})
    second = parse({"base": 50, "jitter": 5})
    assert [first.value_at(t) for t in range(20)] == [second.value_at(t) for t in range(20)]


def test_two_gpus_with_the_same_signal_jitter_differently() -> None:
    gpu0 = parse({"base": 50, "jitter": 5}, field="gpus[0].power_w")
    gpu1 = parse({"base": 50, "jitter": 5}, field="gpus[1].power_w")
    assert [gpu0.value_at(t) for t in range(20)] != [gpu1.value_at(t) for t in range(20)]


@pytest.mark.parametrize(
    ("value", "field", "problem"),
    [
        ({"base": 1, "amplitude": 3}, f"{FIELD}.amplitude", "unknown signal key 'amplitude'"),
        ({"base": "high"}, f"{FIELD}.base", "must be a number, got the string 'high'"),
        ({"base": 1, "jitter": True}, f"{FIELD}.jitter", "must be a number, got true"),
        ({"amp": 3, "period": 0}, f"{FIELD}.period", "must be greater than 0, got 0"),
        ({"amp": 3, "period": -4}, f"{FIELD}.period", "must be greater than 0, got -4"),
        ({"jitter": 3, "jitter_period": 0}, f"{FIELD}.jitter_period", "must be greater than 0"),
        ({"amp": 3}, f"{FIELD}.period", "a signal with an amp needs a period"),
        ({"min": 80, "max": 20}, f"{FIELD}.min", "min (80) is greater than max (20)"),
        ({"waves": [[1]]}, f"{FIELD}.waves[0]", "must be [amp, period_s]"),
        ({"waves": [[1, 0]]}, f"{FIELD}.waves[0]", "period must be greater than 0"),
        ({"waves": 3}, f"{FIELD}.waves", "must be a list"),
        ("50%", FIELD, "a signal must be a number or an object"),
        ([50], FIELD, "a signal must be a number or an object"),
    ],
    ids=lambda case: case if isinstance(case, str) else None,
)
def test_a_bad_signal_names_the_file_and_the_exact_field(
    value: Any, field: str, problem: str
) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse(value)
    assert caught.value.path == "lab.json"
    assert caught.value.field == field
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"Bad scenario lab.json: {field}: ")
