"""The dashboard's remote actions: what reaches gputop on the server is exactly what was typed.

The ssh command's last word is what the server's login shell runs; running it through a
real ``sh`` here, with a stand-in ``gputop`` that prints its arguments, shows each word
arrives once, uninterpreted.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gputop.core.remote.remote_jobs import log_argv, run_argv, signal_argv, stop_argv

HOSTILE = "python train.py --name \"$(touch pwned)\" 'it''s' ; rm -rf ~ `id` $HOME *"


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "gputop"
    script.write_text('#!/bin/sh\nfor word in "$@"; do printf "%s\\0" "$word"; done\n')
    script.chmod(0o755)
    return bin_dir


def words_received(argv: list[str], bin_dir: Path, cwd: Path) -> list[str]:
    assert argv[0] == "ssh"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GPUTOP_PATH": str(bin_dir)}
    result = subprocess.run(
        ["sh", "-c", argv[-1]], env=env, cwd=cwd, capture_output=True, check=True
    )
    return result.stdout.decode().split("\0")[:-1]


def test_a_typed_command_reaches_gputop_run_as_one_word_uninterpreted(
    stand_in: Path, tmp_path: Path
) -> None:
    argv = run_argv("gpu1", ["GPU-aaa", "GPU-bbb"], HOSTILE, cwd="~/my dir;x")

    received = words_received(argv, stand_in, tmp_path)

    assert received == [
        "run",
        "--gpus",
        "GPU-aaa,GPU-bbb",
        "--json",
        "--cwd",
        "~/my dir;x",
        "--",
        HOSTILE,
    ]
    assert not (tmp_path / "pwned").exists()
    assert os.listdir(tmp_path) == ["bin"]


def test_stop_log_and_signal_ask_gputop_there_with_their_own_words(
    stand_in: Path, tmp_path: Path
) -> None:
    assert words_received(stop_argv("gpu1", 7), stand_in, tmp_path) == [
        "jobs",
        "stop",
        "7",
        "--yes",
    ]
    assert words_received(log_argv("gpu1", 7), stand_in, tmp_path) == [
        "jobs",
        "log",
        "7",
        "--follow",
        "--raw",
    ]
    assert words_received(
        signal_argv("gpu1", 4242, 1700000000.25, "SIGKILL"), stand_in, tmp_path
    ) == ["signal", "4242", "--signal", "SIGKILL", "--yes", "--start-time", "1700000000.25"]


def test_the_local_host_runs_this_gputop_without_ssh() -> None:
    argv = stop_argv(None, 7)

    assert argv[1:] == ["-m", "gputop", "jobs", "stop", "7", "--yes"]
    assert "ssh" not in argv[0]
