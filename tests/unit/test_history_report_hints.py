"""``gputop report`` says what a newcomer misses (issue 28): samples outside the window, no
job in ``--by job``, display servers that are no idle holders, cards nobody used."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.history import record_stepped

from gputop.cli.main import main
from gputop.core.history.report import is_display_server

WHOLE = ("--since", "2000-01-01", "--until", "2100-01-01")


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("demo") / "history.sqlite3"
    record_stepped("demo", store, samples=36)  # three simulated minutes
    return store


@pytest.fixture(scope="module")
def v100_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("v100") / "history.sqlite3"
    record_stepped("v100x4", store, samples=12)
    return store


def report(store: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    code = main(["report", "--db", str(store), *args])
    out = capsys.readouterr().out
    assert code == 0
    return out.splitlines()


def test_display_servers_are_never_idle_holders(
    demo_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = report(demo_store, capsys, *WHOLE, "--idle-min", "1m")
    flagged = {line.split()[1] for line in lines[2:] if line.startswith("!")}
    assert "bob" in flagged  # an idle notebook still is one
    assert not flagged & {"root", "gdm"}  # Xorg and gnome-shell hold memory by design
    by_process = report(demo_store, capsys, *WHOLE, "--idle-min", "1m", "--by", "process")
    assert not [line for line in by_process if line.startswith("!") and "Xorg" in line]


@pytest.mark.parametrize(
    ("command", "display"),
    [
        ("/usr/lib/xorg/Xorg vt1 -displayfd 3", True),
        ("/usr/bin/gnome-shell", True),
        ("Xwayland :0 -rootless", True),
        ("python train.py --name Xorg", False),
        ("", False),
        (None, False),
    ],
)
def test_which_commands_are_display_servers(command: str | None, display: bool) -> None:
    assert is_display_server(command) is display


def test_by_gpu_is_headed_gpu_and_lists_cards_nobody_used(
    v100_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = report(v100_store, capsys, *WHOLE, "--by", "gpu")
    assert lines[1].split()[0] == "GPU"
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == {"0", "1", "2", "3"}  # GPUs 1 to 3 held no process
    assert rows["2"][1] == "0s"
    assert lines[2].split()[0] == "0"  # the used card first


def test_by_job_with_processes_but_no_job_says_so(
    demo_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = report(demo_store, capsys, *WHOLE, "--by", "job")
    assert lines[1] == "No gputop job in this window."
    assert "none belonged to a gputop job" in lines[2]
    assert "Nothing was recorded" not in "\n".join(lines)


def test_samples_after_the_window_get_a_hint_with_the_until_to_use(
    demo_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = report(demo_store, capsys, "--since", "2000-01-01", "--until", "2001-01-01")
    assert lines[1] == "Nothing was recorded in this window."
    assert "36 sample(s) were recorded after this window ends" in lines[2]
    assert "add --until " in lines[2]
    until = lines[2].split("add --until ", 1)[1].split()[0]
    again = report(demo_store, capsys, "--since", "2000-01-01", "--until", until)
    assert len(again) > 3 and not any("after this window" in line for line in again)


def test_samples_only_before_the_window_get_a_hint_too(
    demo_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = report(demo_store, capsys, "--since", "2099-01-01", "--until", "2100-01-01")
    assert lines[1] == "Nothing was recorded in this window."
    assert "samples before this window" in lines[2] and "widen --since" in lines[2]
