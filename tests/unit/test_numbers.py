"""Numbers and arguments: finite, in range, ASCII digits, strict JSON; a rejected command
names what is wrong, exits non-zero (never "internal error", 70) and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO

from gputop.cli.main import main
from gputop.core import settings
from gputop.core.fake.scenario import load_scenario
from gputop.core.numbers import strict_json

SCENARIOS = REPO / "gputop" / "core" / "fake" / "scenarios"


def gputop(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``gputop ARGV`` in this process: (exit status, stdout, stderr); argparse's exits too."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def strict_loads(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


# --- intervals, timeouts, polls --------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["nan", "inf", "-inf", "1e999", "0", "-1", "0.1", "3601", "x", "٣"]
)
def test_a_dashboard_interval_that_is_not_finite_and_in_range_is_refused(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    code, _, err = gputop(capsys, "--fake", "demo", f"--interval={value}")
    assert code == 2
    assert f"argument --interval: '{value}'" in err
    assert "from 0.2 to 3600." in err


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "1e308"])
def test_a_snapshot_watch_interval_that_is_not_finite_and_in_range_is_refused(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    code, out, err = gputop(capsys, "snapshot", "--fake", "demo", "--watch", value)
    assert (code, out) == (2, "")
    assert f"argument --watch: '{value}': give a number of seconds from 0.1 to 86400" in err


@pytest.mark.parametrize("command", [["run", "--gpus", "0"], ["jobs", "stop", "1"]])
def test_a_grace_period_of_nan_is_refused(
    capsys: pytest.CaptureFixture[str], state_dir: Path, command: list[str]
) -> None:
    code, _, err = gputop(capsys, *command, "--grace", "nan", "--", "true")
    assert code == 2 and "argument --grace: 'nan': give a number of seconds from 0 to 86400" in err
    assert not state_dir.exists()


def test_a_wait_poll_of_nan_refuses_the_run_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_WAIT_POLL_S", "nan")
    code, out, err = gputop(
        capsys, "run", "--fake", "v100x4", "--gpus", "0", "--wait", "--", "true"
    )
    assert (code, out) == (2, "")
    assert "GPUTOP_WAIT_POLL_S 'nan': give a number of seconds from 0.05 to 300." in err
    assert not state_dir.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "1e308", "٣"])
def test_a_supervisor_meeting_a_bad_wait_poll_uses_the_default_instead_of_spinning(
    value: str,
) -> None:
    assert settings.WAIT_POLL.or_default({"GPUTOP_WAIT_POLL_S": value}) == 5.0


# --- scenario numbers ------------------------------------------------------------------------


def scenario_with(tmp_path: Path, field: str, raw: str, pid: bool = False) -> Path:
    """v100x4 with one GPU field (or the first process's pid) replaced by ``raw`` JSON."""
    data = json.loads((SCENARIOS / "v100x4.json").read_text())
    if pid:
        data["gpus"][0]["processes"][0]["pid"] = "__X__"
    else:
        data["gpus"][0][field] = "__X__"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data).replace('"__X__"', raw))
    return path


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("NaN", "must be a finite number, got NaN"),
        ("Infinity", "must be a finite number, got Infinity"),
        ("-Infinity", "must be a finite number, got -Infinity"),
        ("1e999", "must be a finite number, got Infinity"),
        ("1e308", "must be from -1000000000000 to 1000000000000, got 1e+308"),
        ("1" + "0" * 30, "must be from -1000000000000 to 1000000000000, got a 31-digit number"),
    ],
)
def test_a_scenario_number_that_is_not_finite_or_huge_is_a_named_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, raw: str, problem: str
) -> None:
    path = scenario_with(tmp_path, "temperature_c", raw)
    code, out, err = gputop(capsys, "snapshot", "--fake", str(path))
    assert (code, out) == (2, "")
    assert err == f"gputop: Bad scenario {path}: gpus[0].temperature_c: {problem}\n"


def test_a_scenario_pid_of_2_to_the_31_is_dropped_as_a_driver_reports_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A scenario may imitate a driver that reports an impossible pid: gputop drops it and
    # counts it, it never reaches psutil (which raised OverflowError: exit 70).
    path = scenario_with(tmp_path, "", str(2**31), pid=True)
    code, out, _ = gputop(capsys, "snapshot", "--fake", str(path), "--json")
    assert code == 0
    gpu = json.loads(out)["gpus"][0]
    assert gpu["processes_dropped"] == 1
    assert all(p["pid"] != 2**31 for p in gpu["processes"])


def test_a_scenario_pid_beyond_32_bits_is_a_named_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = scenario_with(tmp_path, "", str(2**32), pid=True)
    code, _, err = gputop(capsys, "snapshot", "--fake", str(path), "--json")
    assert code == 2
    assert "gpus[0].processes[0].pid:" in err and str(2**32) in err


def test_a_scenario_with_an_integer_too_long_for_python_is_a_named_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = scenario_with(tmp_path, "temperature_c", "9" * 5000)
    code, _, err = gputop(capsys, "snapshot", "--fake", str(path))
    assert code == 2 and f"gputop: Bad scenario {path}: not usable JSON" in err


def test_every_built_in_scenario_still_loads() -> None:
    for path in sorted(SCENARIOS.glob("*.json")):
        assert load_scenario(path).gpus


# --- strict JSON -----------------------------------------------------------------------------


def test_json_output_never_contains_nan_or_infinity() -> None:
    text = strict_json({"power_w": float("nan"), "gpus": [float("inf"), 1.5, {"x": -1e999}]})
    assert strict_loads(text) == {"power_w": None, "gpus": [None, 1.5, {"x": None}]}


@pytest.mark.parametrize("scenario", ["demo", "faulty", "mig", "mixed"])
def test_snapshot_json_is_strict_json(capsys: pytest.CaptureFixture[str], scenario: str) -> None:
    code, out, _ = gputop(capsys, "snapshot", "--fake", scenario, "--json")
    assert code == 0 and strict_loads(out)["gpus"]


# --- indices and ids: ASCII digits -----------------------------------------------------------


@pytest.mark.parametrize("value", ["²", "٣", "３", "1,٣"])
def test_gpu_indices_in_other_digits_are_refused_and_nothing_is_launched(
    capsys: pytest.CaptureFixture[str], state_dir: Path, value: str
) -> None:
    code, out, err = gputop(capsys, "run", "--fake", "v100x4", "--gpus", value, "--", "true")
    assert (code, out) == (2, "")
    assert "is not a GPU index (digits 0-9) or a UUID prefix (hex digits)" in err
    assert "internal error" not in err
    assert not state_dir.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["pick", "--fake", "v100x4", "-n", "٢"],
        ["pick", "--fake", "v100x4", "--max-util", "²"],
        ["run", "--fake", "v100x4", "--auto", "٢", "--", "true"],
        ["run", "--fake", "v100x4", "--gpus", "0", "--min-free-mib", "１", "--", "true"],
    ],
)
def test_counts_in_other_digits_are_refused(
    capsys: pytest.CaptureFixture[str], state_dir: Path, argv: list[str]
) -> None:
    code, out, err = gputop(capsys, *argv)
    assert (code, out) == (2, "")
    assert "is not a whole number (digits 0-9)" in err
    assert not state_dir.exists()


def test_a_23_digit_job_id_is_no_such_job_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    code, _, err = gputop(capsys, "jobs", "stop", "1" * 23, "--yes")
    assert code == 2
    assert f"there is no job '{'1' * 23}': job ids are at most 9223372036854775807" in err
    assert "internal error" not in err
    assert not state_dir.exists()


@pytest.mark.parametrize(
    ("given", "value"),
    [
        ("1000000000000000000", 10**18),  # 19 digits: a job id SQLite can hold
        ("00000000000000000007", 7),  # 20 digits, zero-padded: job 7
        ("9223372036854775807", 2**63 - 1),
        ("0" * 5000 + "42", 42),
    ],
)
def test_a_job_id_is_checked_by_its_value_not_its_length(given: str, value: int) -> None:
    from gputop.cli.jobs_command import job_id

    assert job_id(given) == value


@pytest.mark.parametrize("given", ["9223372036854775808", "1" * 20, "9" * 5000])
def test_a_job_id_past_sqlites_integers_is_no_job(
    capsys: pytest.CaptureFixture[str], state_dir: Path, given: str
) -> None:
    code, _, err = gputop(capsys, "jobs", "log", given)
    assert code == 2 and "job ids are at most 9223372036854775807" in err
    assert len(err) < 300 and not state_dir.exists()


@pytest.mark.parametrize("value", ["²", "٣", "-1", "1e3"])
def test_a_job_id_that_is_not_ascii_digits_is_refused(
    capsys: pytest.CaptureFixture[str], state_dir: Path, value: str
) -> None:
    code, _, err = gputop(capsys, "jobs", "log", value)
    assert code == 2 and f"{value!r} is not a job id (a number in digits 0-9" in err


def test_an_unknown_job_in_a_missing_store_is_no_such_job_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    code, _, err = gputop(capsys, "jobs", "stop", "7", "--yes")
    assert code == 1 and "There is no job 7; `gputop jobs` lists them." in err
    assert not state_dir.exists()


# --- more GPUs than the machine has ----------------------------------------------------------


@pytest.mark.parametrize("wait", [[], ["--wait"]])
def test_auto_for_more_gpus_than_the_machine_has_is_refused(
    capsys: pytest.CaptureFixture[str], state_dir: Path, wait: list[str]
) -> None:
    code, out, err = gputop(capsys, "run", "--fake", "v100x4", "--auto", "99", *wait, "--", "true")
    assert (code, out) == (2, "")
    assert "Cannot use 99 GPUs: this machine has 4 GPUs, so such a job could never start." in err
    assert not state_dir.exists()


# --- rejected commands write nothing ---------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--gpus", "7", "--", "true"],
        ["--gpus", "0", "--cwd", "/no/such/dir", "--", "true"],
        ["--gpus", "0", "--", "python 'a.py"],
        ["--gpus", "0", "--tmux", "--", "true"],
        ["--auto", "4", "--", "true"],
        ["--gpus", "0", "--name", " ", "--", "true"],
    ],
)
def test_a_rejected_run_creates_no_state_directory(
    capsys: pytest.CaptureFixture[str], state_dir: Path, argv: list[str]
) -> None:
    code, out, err = gputop(capsys, "run", "--fake", "v100x4", *argv)
    assert code != 0 and out == "" and err.startswith("gputop: ")
    assert not state_dir.exists()


def test_pick_and_jobs_read_without_creating_a_store(
    capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    assert gputop(capsys, "pick", "--fake", "v100x4")[0] == 0
    code, out, _ = gputop(capsys, "jobs")
    assert code == 0 and out.startswith("No jobs yet.")
    assert gputop(capsys, "jobs", "--json")[1] == "[]\n"
    assert not state_dir.exists()


TOO_MANY_DIGITS = "99999999999999999999"


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["pick", "--fake", "v100x4", "-n", TOO_MANY_DIGITS], "give 1 or more, at most"),
        (["pick", "--fake", "v100x4", "--min-free-mib", TOO_MANY_DIGITS], "give 0 or more"),
        (["pick", "--fake", "v100x4", "--max-util", TOO_MANY_DIGITS], "give from 0 to 100"),
        (["run", "--fake", "v100x4", "--auto", TOO_MANY_DIGITS, "--", "true"], "at most"),
        (["claim", "--fake", "v100x4", "-n", TOO_MANY_DIGITS], "give from 1 to 4096"),
        (["exporter", "--listen", f"127.0.0.1:{TOO_MANY_DIGITS}"], "give from 0 to 65535"),
    ],
)
def test_a_whole_number_with_too_many_digits_is_too_large_not_malformed(
    capsys: pytest.CaptureFixture[str], state_dir: Path, argv: list[str], complaint: str
) -> None:
    code, out, err = gputop(capsys, *argv)
    assert (code, out) == (2, "")
    assert f"'{TOO_MANY_DIGITS}' is too large" in err or f"{TOO_MANY_DIGITS} is too large" in err
    assert complaint in err
    assert "not a whole number" not in err and "internal error" not in err
    assert not state_dir.exists()


def test_a_negative_whole_number_with_too_many_digits_is_too_small(
    capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    code, out, err = gputop(capsys, "pick", "--fake", "v100x4", "--min-free-mib", "-" + "9" * 30)
    assert (code, out) == (2, "")
    assert "is too small: give 0 or more" in err
    assert "not a whole number" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--since", "99999d"],
        ["report", "--since", "999999999999d"],
        ["report", "--since", "1" + "0" * 40 + "s"],
        ["report", "--since", "7d", "--until", "999999999999d"],
        ["claim", "--fake", "v100x4", "-n", "1", "--for", "999999999999d"],
    ],
)
def test_a_duration_with_too_many_digits_is_too_long_not_malformed(
    capsys: pytest.CaptureFixture[str], state_dir: Path, tmp_path: Path, argv: list[str]
) -> None:
    code, out, err = gputop(capsys, *argv)
    assert (code, out) == (2, "")
    assert "is too long" in err
    assert "is not a time" not in err and "is not a duration" not in err
    assert "internal error" not in err


def test_digits_within_reads_a_number_from_outside_or_says_not_available() -> None:
    from gputop.core.numbers import digits_within, whole_within

    assert digits_within(" 12 ", 0, 100) == 12
    for text in ("٣", "-1", "9" * 400, None, "101", "1e3", ""):
        assert digits_within(text, 0, 100) is None
    assert whole_within(3, 0, 3) and not whole_within(True, 0, 3) and not whole_within(3.0, 0, 3)
