"""The command line as a new user meets it (issue 40): each option named once in its error,
and gputop run's warning for a program that is not there (shared with the launch dialog)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.cli.main import main


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("10x", "argument --for: '10x' is not a duration: give a number and a unit"),
        ("30d", "argument --for: '30d': a claim lasts from 1m00s to 7d00h00m"),
    ],
)
def test_claim_for_names_the_option_once(
    given: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["claim", "--fake", "v100x4", "--gpus", "0", "--for", given])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "--for --for" not in err and "--for: --for" not in err


def test_run_warns_that_a_program_that_is_not_there_will_fail(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--fake", "v100x4", "--gpus", "2", "--", "no-such-program-gputop"]) == 0
    assert (
        "gputop: warning: no-such-program-gputop was not found; the job will fail with exit "
        "code 127 (command not found)." in capsys.readouterr().err
    )
