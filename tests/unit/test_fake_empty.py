"""``--fake ''``: an empty scenario names none, and is refused as a usage error (exit 2)
wherever the option is given, rather than meaning no simulated GPUs (the real ones, or
``GPUTOP_FAKE``'s, without a word)."""

from __future__ import annotations

import pytest

from gputop.cli.main import main


@pytest.mark.parametrize(
    "argv",
    [
        ["snapshot", "--fake", ""],
        ["--fake", "", "snapshot"],
        ["snapshot", "--fake="],
        ["exporter", "--fake", ""],
        ["--fake", ""],  # the dashboard
    ],
    ids=["after", "before", "equals", "exporter", "dashboard"],
)
def test_an_empty_fake_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "demo")  # what an empty --fake fell back to
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert "argument --fake: empty: give a scenario's name (demo, v100x4, " in said, said


def test_a_scenario_name_is_still_taken(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "--fake", "v100x4", "--json"]) == 0
    assert '"gpus"' in capsys.readouterr().out


def test_the_scenarios_the_option_names_are_the_built_in_ones() -> None:
    """--fake's help and refusal name the built-in scenarios from a list of their own (the
    fake is not imported before the first frame): the same names, in the same order."""
    from gputop.cli.main import SCENARIO_NAMES
    from gputop.core.fake import BUILTIN_SCENARIOS

    assert SCENARIO_NAMES.split(", ") == list(BUILTIN_SCENARIOS)
