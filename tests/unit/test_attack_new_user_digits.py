"""What a new user may type as ``run --slurm --gpus``: Python's ``int()`` reads ``²`` as no
number though ``"²".isdigit()`` says it is one, and refuses a whole number of more than 4,300
digits. Each is the usage message and exit 2, never an internal error."""

from __future__ import annotations

import pytest

from gputop.cli.main import main


@pytest.mark.parametrize("gpus", ["²", "2²", "٣", "３", "9" * 5000, "0", "-1", ""])
def test_a_slurm_gpu_count_that_is_no_ascii_number_is_refused_by_name(
    gpus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--slurm", "--gpus", gpus, "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "--gpus is a number of GPUs" in err
    assert "internal error" not in err and "Traceback" not in err
    assert len(err) < 400


def _refused_wait(timeout: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``jobs wait 1 --timeout TIMEOUT``'s usage message (exit 2)."""
    with pytest.raises(SystemExit) as stopped:
        main(["jobs", "wait", "1", "--timeout", timeout])
    assert stopped.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("timeout", ["nan", "-1", "1e400", "99999999"])
def test_the_longest_wait_is_said_in_plain_digits(
    timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``jobs wait --timeout``'s bound is a year: said "31622400", never "3.16224e+07"."""
    err = _refused_wait(timeout, capsys)
    assert "from 0 to 31622400." in err and "e+" not in err


@pytest.mark.parametrize("seconds", ["1_0", "0_5", "1__0"])
def test_seconds_with_an_underscore_are_refused_not_read_as_another_number(
    seconds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python's ``float("1_0")`` is 10.0: a typo for 1.0 or 10 became a ten-second wait."""
    assert "is not a number of seconds" in _refused_wait(seconds, capsys)
