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


@pytest.mark.parametrize(
    "bad_time",
    ["253402300800", "1e300", "-1e300", "'x'", "x'00ff'"],
    ids=["year-10000", "huge", "huge-negative", "text", "blob"],
)
def test_a_hand_edited_sample_time_is_no_internal_error_in_the_hints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad_time: str
) -> None:
    """Another user with write access set one sample's time by hand with sqlite3 (year 10000,
    text): the window hints named it through datetime (ValueError) or added 1 to it
    (TypeError), and the report ended in an internal error instead of its table."""
    import sqlite3

    store = tmp_path / "history.sqlite3"
    record_stepped("v100x4", store, samples=4)
    connection = sqlite3.connect(store)
    with connection:
        connection.execute(f"UPDATE samples SET t = {bad_time} WHERE id = 1")
    connection.close()
    for window in (("--since", "1h"), WHOLE):
        code = main(["report", "--db", str(store), *window])
        captured = capsys.readouterr()
        assert code in (0, 1), captured.err
        assert "internal error" not in captured.err
