"""A mistyped option before the command (``gputop --fke demo snapshot``) is named as the
mistake: argparse took the option's value for the command and said only "invalid choice:
'demo'", which names no mistake the user made."""

from __future__ import annotations

import pytest

from gputop.cli.main import main


@pytest.mark.parametrize(
    "argv",
    [
        ["--fke", "demo", "snapshot"],
        ["--fke", "demo"],
        ["--intervl", "2", "snapshot", "--json"],
        ["--fke=demo", "pick"],
        ["--timeout", "5", "--readonly", "--fke", "demo", "snapshot"],
    ],
    ids=" ".join,
)
def test_a_mistyped_option_is_named(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    mistyped = next(word for word in argv if word.startswith("--fke") or word == "--intervl")
    assert f"unrecognized arguments: {mistyped}" in err
    assert "invalid choice" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--fak", "demo", "snapshot"],
        ["--fake=demo", "snapshot"],
        ["--interval", "2", "snapshot", "--fake", "demo"],
    ],
    ids=" ".join,
)
def test_an_option_or_its_unique_start_still_works(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    assert "GPU" in capsys.readouterr().out


def test_a_mistyped_command_is_still_said_as_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["snapshots"])
    assert "invalid choice: 'snapshots'" in capsys.readouterr().err
