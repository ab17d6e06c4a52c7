"""``--timeout`` of the fleet: one default for the dashboard (``gputop --prometheus``),
``snapshot --prometheus`` and ``pick --prometheus``, and a value given is the one every one
of them reads with (the deadline itself: tests/real/test_fleet_prometheus.py)."""

from __future__ import annotations

import pytest

from gputop.cli import dashboard
from gputop.cli.fleet_cli import fleet_timeout
from gputop.cli.main import _parse
from gputop.core.errors import UsageError
from gputop.core.fleet import TIMEOUT_S

URL = "http://prometheus:9090"
COMMANDS = ([], ["snapshot"], ["pick", "-n", "1"])


def test_one_default_for_the_dashboard_snapshot_and_pick() -> None:
    assert [fleet_timeout(_parse([*c, "--prometheus", URL])) for c in COMMANDS] == [TIMEOUT_S] * 3


def test_a_timeout_given_is_the_one_each_reads_with() -> None:
    given = [fleet_timeout(_parse([*c, "--prometheus", URL, "--timeout", "2.5"])) for c in COMMANDS]
    assert given == [2.5] * 3


def test_the_dashboards_timeout_goes_with_prometheus() -> None:
    with pytest.raises(UsageError, match="--timeout goes with --prometheus"):
        dashboard.run(_parse(["--timeout", "3"]))


def _gputop(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """``gputop ARGV`` on simulated GPUs as a person runs it: (exit status, stderr)."""
    from gputop.cli.main import main

    try:
        status = main(["--fake", "demo", *argv])
    except SystemExit as stop:  # argparse's refusal
        status = int(stop.code or 0)
    return status, capsys.readouterr().err


@pytest.mark.parametrize("value", ["inf", "1e999", "nan", "-5", "0", "\u0663", "ten"])
@pytest.mark.parametrize(
    "command",
    [("snapshot", "--hosts", "local"), ("pick", "--hosts", "local"), ("--hosts", "local")],
)
def test_a_timeout_no_clock_reaches_is_a_usage_error_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
    value: str,
) -> None:
    # 'snapshot --hosts local --timeout inf' (or 1e999) ended in "internal error:
    # OverflowError: timestamp out of range" (exit 70), and '--timeout ٣' (an Arabic-Indic
    # three, which float() reads as 3) was taken as 3 seconds.
    monkeypatch.delenv("GPUTOP_DEBUG", raising=False)
    status, err = _gputop(capsys, *command, "--timeout", value)

    assert status == 2, err
    assert "internal error" not in err
    assert "argument --timeout" in err and "from 0.1 to 86400" in err


def test_the_timeout_in_range_is_still_taken_for_hosts_and_prometheus() -> None:
    from gputop.cli.lab_common import hosts_timeout

    assert hosts_timeout(_parse(["snapshot", "--hosts", "local", "--timeout", "2.5"])) == 2.5
    assert fleet_timeout(_parse(["--prometheus", URL, "--timeout", "86400"])) == 3600.0


@pytest.mark.parametrize(
    "command",
    [("snapshot",), ("pick",), ("run", "--gpus", "0"), ()],
)
@pytest.mark.parametrize("hosts", ["", " ", ","])
def test_hosts_given_empty_is_refused_never_taken_for_this_machine(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...], hosts: str
) -> None:
    # 'gputop run --hosts "$HOSTS" --gpus 0 -- train.py' with HOSTS unset launched the job
    # on this machine, and 'snapshot --hosts ""' showed this machine's cards, as if no
    # --hosts had been given ('--hosts " , "' was refused).
    tail = ("--", "true") if command[:1] == ("run",) else ()
    status, err = _gputop(capsys, *command, "--hosts", hosts, *tail)

    assert status == 2, err
    assert (
        "argument --hosts: '' names no host" in err
        or "names no host: needs host names or a group" in err
    )
