"""The lines gputop itself writes into a job's log carry data only as the sanitiser shows it.

A job's name, command, working directory or an error quoting them may hold ESC, newlines or
bytes that are not UTF-8; the job's own output is its business (docs/security.md, guarantee
3), but a ``[gputop]`` line is gputop's, and must neither colour the terminal, clear it,
nor forge a second line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.jobs import wait_until_ended

from gputop.cli.main import main
from gputop.core.jobs.logs import LOG_PREFIX, gputop_line
from gputop.core.jobs.supervisor import main as supervisor_main


def own_lines(log: bytes) -> list[bytes]:
    return [line for line in log.split(b"\n") if line.startswith(LOG_PREFIX.encode())]


def test_a_gputop_line_is_one_line_without_control_characters() -> None:
    line = gputop_line("job 1 (\x1b[31mred\nforged) in /tmp/d\udcff")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert b"\x1b" not in line
    assert line.decode("utf-8", "strict").endswith("job 1 (\\e[31mred\\nforged) in /tmp/d\\xff\n")


def test_the_log_lines_of_gputop_show_the_name_command_and_directory_escaped(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cwd = os.fsencode(tmp_path) + b"/d\x1b]0;title\x07\xff"
    os.mkdir(cwd)
    name = "\x1b[31mred[bold]markup[/]"
    options = ["--gpus", "2,3", "--name", name, "--cwd", os.fsdecode(cwd)]
    argv = ["echo", "arg\x1b[2Jclear", os.fsdecode(b"x\xff")]
    assert main(["run", "--fake", "v100x4", *options, "--", *argv]) == 0
    capsys.readouterr()
    ended = wait_until_ended(state_dir, 1)
    log = Path(ended.log_path).read_bytes()

    own = own_lines(log)
    assert len(own) == 2, log  # starting, exited
    for line in own:
        assert not any(byte < 0x20 or byte == 0x7F for byte in line), line
        line.decode("utf-8", "strict")
    assert b"job 1 (\\e[31mred[bold]markup[/]) starting: echo 'arg\\e[2Jclear'" in own[0]
    assert b"x\\xff" in own[0]
    assert b"/d\\e]0;title\\x07\\xff;" in own[0]
    assert b"arg\x1b[2Jclear x\xff\n" in log  # the job's own output is the job's, as it was


def test_the_supervisors_own_errors_in_the_log_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = os.fsdecode(os.fsencode(tmp_path) + b"/st\x1b[2J\xff")
    Path(state).write_text("not a directory")
    assert supervisor_main(["--state-dir", state, "--job", "1"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\udcff" not in err
    assert "st\\e[2J\\xff" in err
