"""CUDA_VISIBLE_DEVICES values no one means, as a shell or a script may still set them (and as
``gputop map --visible`` takes them): each is read as the driver's strtoul reads it, never an
internal error."""

from __future__ import annotations

import pytest
from helpers.visibility_machines import four_same, mig_box

from gputop.cli.main import main
from gputop.core.visibility import resolve_visibility

DIGITS = "9" * 5000
"""Past the 4,300 digits int() reads from text (Python 3.11 and later)."""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (DIGITS, []),
        (f"1,{DIGITS},0", [1]),  # a number past every GPU: the driver stops there
        ("0" * 5000 + "2", [2]),  # leading zeros: strtoul reads 2
        (f"-{DIGITS}", []),
        (f"{'0' * 5000}1 x", [1]),
    ],
    ids=["huge", "huge-second", "zeros", "negative", "zeros-and-rest"],
)
def test_an_integer_entry_of_thousands_of_digits_is_read_as_strtoul_does(
    value: str, expected: list[int]
) -> None:
    visibility = resolve_visibility(four_same(), "550.54.15", value, None)
    assert [device.physical_index for device in visibility.devices] == expected
    assert all(len(warning.message) < 2 * len(value) + 400 for warning in visibility.warnings)


def test_a_legacy_mig_entry_of_thousands_of_digits_names_no_instance() -> None:
    for value in (f"MIG-GPU-11111111/{DIGITS}/0", f"MIG-GPU-11111111/2/{DIGITS}"):
        visibility = resolve_visibility(mig_box(), "550.54.15", value, None)
        assert visibility.devices == ()
        assert visibility.warnings
    arabic = resolve_visibility(mig_box(), "550.54.15", "MIG-GPU-11111111/\u0662/0", None)
    assert arabic.devices == ()  # '٢' is no digit to strtoul: no instance 2
    leading = resolve_visibility(mig_box(), "550.54.15", f"MIG-GPU-11111111/{'0' * 5000}2/0", None)
    assert len(leading.devices) == 1


@pytest.mark.parametrize("json", [False, True], ids=["text", "json"])
def test_map_with_such_a_value_answers(
    json: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """'gputop map --visible' (or CUDA_VISIBLE_DEVICES) of 5,000 digits ended in 'internal
    error: ValueError: Exceeds the limit (4300 digits) for integer string conversion'."""
    monkeypatch.setenv("GPUTOP_FAKE", "demo")
    code = main(["map", "--no-torch", "--visible", DIGITS, *(["--json"] if json else [])])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "internal error" not in captured.err
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", DIGITS)
    assert main(["map", "--no-torch", *(["--json"] if json else [])]) == 0
