"""``gputop signal``: what the lab dashboard's t/T run on a server, checked there."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from gputop.cli.main import main


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def start_time(pid: int) -> str:
    return repr(psutil.Process(pid).create_time())


def test_signal_sends_the_signal_to_your_own_process_that_is_still_the_same(
    sleeper: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    pid = str(sleeper.pid)
    code = main(
        ["signal", pid, "--signal", "SIGTERM", "--start-time", start_time(sleeper.pid), "--yes"]
    )

    assert code == 0, capsys.readouterr().err
    assert sleeper.wait(10) == -15
    assert f"Sent SIGTERM to process {pid}." in capsys.readouterr().out


def test_signal_never_asks_so_it_refuses_without_yes(
    sleeper: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["signal", str(sleeper.pid), "--start-time", start_time(sleeper.pid)])

    assert code != 0
    assert "add --yes" in capsys.readouterr().err
    assert sleeper.poll() is None


def test_signal_refuses_a_process_whose_start_time_differs(
    sleeper: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    earlier = repr(psutil.Process(sleeper.pid).create_time() - 3600)
    code = main(["signal", str(sleeper.pid), "--start-time", earlier, "--yes"])

    assert code != 0
    assert capsys.readouterr().err.startswith("gputop: ")
    assert sleeper.poll() is None


def test_signal_refuses_another_users_process(capsys: pytest.CaptureFixture[str]) -> None:
    init = psutil.Process(1)
    if init.uids().real == psutil.Process().uids().real:
        pytest.skip("this test runs as the owner of pid 1 (root): no other user's process")
    code = main(["signal", "1", "--start-time", repr(init.create_time()), "--yes"])

    assert code != 0
    assert psutil.pid_exists(1)


def test_signal_without_the_processs_start_says_which_option_gives_it(
    sleeper: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    """A pid alone proves nothing (a later process may have it): nothing is sent, and the
    refusal says what to add, as the help does."""
    code = main(["signal", str(sleeper.pid), "--yes"])

    err = capsys.readouterr().err
    assert code == 2, err
    assert "--start-time" in err and "--start-ticks" in err and "--boot-id" in err, err
    assert sleeper.poll() is None


def test_signals_help_says_the_start_is_needed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["signal", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "(with --start-time)" not in shown
    assert "one of them is needed" in shown, shown
