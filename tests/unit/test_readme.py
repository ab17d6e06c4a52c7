"""The README's examples run: every command of a block marked as an example exits 0.

A block is marked by an HTML comment on the line before its opening fence:
``<!-- example -->`` runs each ``$ `` line of the ``console`` block that follows;
``<!-- example: same output -->`` also requires the output shown, line for line. Commands run
on simulated GPUs with the clock frozen (``GPUTOP_FAKE_TIME``), in a private state directory,
one block after another as a reader would type them; ``gputop`` is this checkout's. Each line
is split like a shell would (``shlex``) and run without one.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO

ROOT = REPO
MARK = re.compile(r"^<!-- example(?P<same>: same output)? -->$")
TIMEOUT_S = 120
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


@dataclass
class Example:
    line: int
    command: str
    shown: list[str]
    same_output: bool


def examples(text: str) -> list[Example]:
    lines = text.splitlines()
    found: list[Example] = []
    for number, line in enumerate(lines):
        mark = MARK.match(line.strip())
        if mark is None:
            continue
        fence = lines[number + 1] if number + 1 < len(lines) else ""
        where = f"README line {number + 2}"
        assert fence.startswith("```console"), f"{where}: a marked example is a console block"
        current: Example | None = None
        for offset, body in enumerate(lines[number + 2 :], start=number + 3):
            if body.startswith("```"):
                break
            if body.startswith("$ "):
                current = Example(offset, body[2:], [], mark.group("same") is not None)
                found.append(current)
            elif current is not None:
                current.shown.append(body)
        else:
            raise AssertionError(f"README line {number + 1}: the example's block never ends")
    return found


def argv_and_env(command: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    words = shlex.split(command)
    env = dict(env)
    while words and ASSIGNMENT.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words and words[0] == "gputop", f"a README example runs gputop: {command}"
    return [sys.executable, "-m", "gputop", *words[1:]], env


README_EXAMPLES = examples((ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_readme_has_examples_and_the_parser_sees_them() -> None:
    assert len(README_EXAMPLES) >= 5
    assert any(e.same_output for e in README_EXAMPLES)
    sample = examples("<!-- example -->\n```console\n$ gputop jobs\nout\n```\n")
    assert [(e.command, e.shown) for e in sample] == [("gputop jobs", ["out"])]


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    home = tmp_path_factory.mktemp("reader")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTOP_", "CUDA_"))}
    env.update(
        GPUTOP_FAKE_TIME="30",
        TZ="UTC",
        GPUTOP_STATE_DIR=str(home / "state"),
        XDG_STATE_HOME=str(home / "xdg-state"),
        XDG_CONFIG_HOME=str(home / "xdg-config"),
        PYTHONPATH=str(ROOT),
    )
    return home, env


@pytest.mark.parametrize("example", README_EXAMPLES, ids=lambda e: f"line{e.line}")
def test_a_readme_example_runs(example: Example, reader: tuple[Path, dict[str, str]]) -> None:
    home, env = reader
    argv, env = argv_and_env(example.command, env)
    done = subprocess.run(
        argv, cwd=home, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    assert done.returncode == 0, (
        f"README line {example.line}: `{example.command}` exited {done.returncode}\n"
        f"{done.stdout}{done.stderr}"
    )
    if example.same_output:
        assert done.stdout.splitlines() == example.shown, f"README line {example.line}"
    else:
        shown = [line for line in example.shown if line.strip() and line.strip() != "..."]
        printed = done.stdout.splitlines()
        for line in shown:  # what is shown is there, except lines cut with "..."
            if "..." not in line:
                assert line in printed, f"README line {example.line}: {line!r} not printed"
