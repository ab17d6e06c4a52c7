"""Every JSON document gputop writes is strict: no NaN or Infinity (docs/security.md).

Python's ``json`` writes ``NaN`` unless told not to, and most other parsers refuse it. Two
proofs: every ``json.dump``/``json.dumps`` in the package says ``allow_nan=False`` (or goes
through ``strict_json``), and the documents of ``snapshot``, ``map``, ``jobs`` and the agent
parse with a parser that refuses the non-standard constants. ``snapshot --hosts`` and
``pick --hosts``: tests/tui/test_lab_hostile_host.py, with a host that sends NaN.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from helpers.jobs import launch, probe_command, wait_until_ended

from gputop.cli.main import main

PACKAGE = REPO / "gputop"


def strict_loads(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {constant!r} in {text[:200]!r}")

    return json.loads(text, parse_constant=refuse)


def json_writes_without_allow_nan_false(source: str) -> list[int]:
    """Lines of ``json.dump(...)``/``json.dumps(...)`` calls that may write NaN."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        target = node.func
        if not (
            target.attr in {"dump", "dumps"}
            and isinstance(target.value, ast.Name)
            and target.value.id == "json"
        ):
            continue
        strict = any(
            k.arg == "allow_nan" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in node.keywords
        )
        if not strict:
            lines.append(node.lineno)
    return lines


def test_the_scan_finds_a_json_write_that_allows_nan() -> None:
    assert json_writes_without_allow_nan_false("import json\njson.dumps({'a': 1.0})\n") == [2]
    assert json_writes_without_allow_nan_false("json.dumps(x, allow_nan=False)\n") == []


def test_every_json_write_in_the_package_refuses_nan() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in json_writes_without_allow_nan_false(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.mark.parametrize("scenario", ["faulty", "dgx-h100", "mig"])
def test_snapshot_json_is_strict(scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    document = strict_loads(run_cli(capsys, "snapshot", "--json", "--fake", scenario))
    assert document["gpus"]


@pytest.mark.parametrize("scenario", ["faulty", "dgx-h100", "mig"])
def test_map_json_is_strict(scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    document = strict_loads(run_cli(capsys, "map", "--json", "--fake", scenario))
    assert isinstance(document, dict) and document


def test_jobs_json_is_strict(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = launch(state_dir, probe_command(tmp_path / "p.json", "--say", "done"), gpus=(1,))
    wait_until_ended(state_dir, started.id)
    (record,) = strict_loads(run_cli(capsys, "jobs", "--json"))
    assert record["id"] == started.id and isinstance(record["ended_at"], float)


def test_the_agents_lines_are_strict(tmp_path: Path) -> None:
    agent = subprocess.Popen(
        [sys.executable, "-m", "gputop", "agent", "--fake", "faulty", "--interval", "0.2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin", "GPUTOP_STATE_DIR": str(tmp_path / "state")},
    )
    try:
        assert agent.stdout is not None
        lines = [agent.stdout.readline() for _ in range(3)]
    finally:
        assert agent.stdin is not None
        agent.stdin.close()
        agent.wait(timeout=20)
    messages = [strict_loads(line) for line in lines]
    assert all(isinstance(m, dict) for m in messages) and len(messages) == 3
