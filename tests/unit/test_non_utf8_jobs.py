"""Jobs whose argv, name or working directory hold bytes that are not UTF-8.

Python keeps such bytes of a command line or a path as lone surrogates (surrogateescape).
The job is recorded and started with its exact bytes, shown escaped (``\\xff``) and written
to JSON as valid UTF-8.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.jobs import PYTHON, job, wait_until_ended
from helpers.waiting import wait_for

from gputop.cli.main import main
from gputop.core.claims.files import content
from gputop.core.jobs.launch import RUN_DIR
from gputop.core.jobs.store import JobStore
from gputop.core.private_files import read_env_file, write_env_file

PROBE = (
    "import json, os, sys; open(sys.argv[1], 'w').write(json.dumps("
    "{'argv': [os.fsencode(a).hex() for a in sys.argv[2:]], 'cwd': os.getcwdb().hex()}))"
)


def undecodable(raw: bytes) -> str:
    """``raw`` as Python's argv or a path holds it."""
    return os.fsdecode(raw)


def test_a_job_with_bytes_that_are_not_utf8_runs_with_those_exact_bytes(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "probe.json"
    cwd = os.fsencode(tmp_path) + b"/dir\xfe\xff"
    os.mkdir(cwd)
    args = [b"\xff", b"arg\xc3(\x1b[2Jclear", "ünï".encode()]
    command = [PYTHON, "-c", PROBE, str(out), *(undecodable(arg) for arg in args)]
    name = undecodable(b"name\xff")
    options = ["--gpus", "1", "--name", name, "--cwd", os.fsdecode(cwd)]
    code = main(["run", "--fake", "v100x4", *options, "--", *command])
    printed, err = capsys.readouterr()
    assert code == 0, err
    assert "\udcff" not in printed + err
    assert "Job 1 (name\\xff) launched detached." in printed

    ended = wait_until_ended(state_dir, 1)
    assert ended.exit_code == 0, Path(ended.log_path).read_text(errors="replace")
    seen = json.loads(wait_for(out.read_text, "the probe's report"))
    assert [bytes.fromhex(arg) for arg in seen["argv"]] == args
    assert bytes.fromhex(seen["cwd"]) == cwd

    recorded = job(state_dir, 1)
    assert recorded.command == tuple(command)
    assert recorded.name == name
    assert os.fsencode(recorded.cwd) == cwd

    assert main(["jobs"]) == 0
    table, _ = capsys.readouterr()
    assert "name\\xff" in table and "\udcff" not in table and "\x1b" not in table

    assert main(["jobs", "--json"]) == 0
    raw, _ = capsys.readouterr()
    record = json.loads(raw.encode("utf-8").decode("utf-8", "strict"))
    (listed,) = record if isinstance(record, list) else record["jobs"]
    assert listed["name"] == "name\\xff"
    assert listed["command"][4] == "\\xff"
    assert listed["cwd"].endswith("/dir\\xfe\\xff")


def test_an_undecodable_command_typed_as_one_text_is_kept_in_the_history(
    state_dir: Path,
) -> None:
    text = undecodable(b"echo \xff")
    with JobStore.open(state_dir) as store:
        store.add_history(text)
        store.add_history("echo plain")
        assert store.history() == [text, "echo plain"]


def test_the_tmux_hand_over_keeps_an_undecodable_environment_exactly_in_strict_json(
    state_dir: Path,
) -> None:
    environ = {
        "PLAIN": "ünï",
        undecodable(b"KEY\xfe"): "v",
        "DATA": undecodable(b"val\xffue"),
    }
    with JobStore.open(state_dir):
        path = write_env_file(state_dir, RUN_DIR, 7, environ)
    Path(path).read_bytes().decode("utf-8", "strict")
    assert "\\udc" not in Path(path).read_text()  # no lone surrogate, even escaped
    assert read_env_file(path) == environ


def test_a_claim_noting_an_undecodable_job_name_is_strict_json() -> None:
    data = content("GPU-1", 1, 1000, "ana", 1e9, undecodable(b"name\xff"), 3)
    document = json.loads(data.decode("utf-8", "strict"))
    assert "\\udc" not in data.decode()
    assert document["note"] == "name\\xff"


def test_an_env_file_nested_too_deeply_holds_no_environment(state_dir: Path) -> None:
    with JobStore.open(state_dir):
        path = write_env_file(state_dir, RUN_DIR, 8, {"A": "b"})
    Path(path).write_text("[" * 100_000)

    assert read_env_file(path) is None
    assert not Path(path).exists()  # read once and removed, as any env file
