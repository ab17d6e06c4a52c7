"""Files the user names (hosts.toml, a scenario file, ``--prometheus-ca``) are read without
blocking and within a bound: a FIFO there is refused at once, not waited on; a file far
larger than any real one is refused with a message naming it and the limit (exit 2, no
traceback), not read whole into memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.jobs import run_cli

MAX_HOSTS_FILE_BYTES = 1 << 20
"""The bounds docs/faults.md gives ("A file too large"): 1 MiB for hosts.toml,"""
MAX_SCENARIO_BYTES = 16 << 20
"""16 MiB for a scenario file."""

HOSTS = '[groups]\nlab = ["local"]\n'


def config_with_hosts(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Where hosts.toml goes under an XDG config directory of the test's own."""
    hosts = tmp_path / "config" / "gputop" / "hosts.toml"
    hosts.parent.mkdir(parents=True)
    return hosts, {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}


def env_now() -> dict[str, str]:
    return dict(os.environ)


def answered(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI's answer; a child still blocked after 20 s (on a FIFO) fails the test."""
    try:
        return run_cli(*argv, env=env, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"gputop {' '.join(argv)} did not answer in 20 s: blocked on a FIFO")


def test_a_hosts_file_over_the_limit_is_refused_by_name(tmp_path: Path) -> None:
    hosts, env = config_with_hosts(tmp_path)
    padding = "# " + "x" * 97 + "\n"  # valid TOML: it would parse, and the group work
    hosts.write_text(HOSTS + padding * (MAX_HOSTS_FILE_BYTES // len(padding) + 1))

    done = answered("snapshot", "--hosts", "lab", "--fake", "demo", env=env)

    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{hosts} is larger than 1 MiB" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_hosts_file_just_under_the_limit_is_read(tmp_path: Path) -> None:
    hosts, env = config_with_hosts(tmp_path)
    hosts.write_text(HOSTS + "#" * (MAX_HOSTS_FILE_BYTES - len(HOSTS) - 1) + "\n")

    done = answered("snapshot", "--hosts", "lab", "--fake", "demo", "--json", env=env)

    assert done.returncode == 0, done.stderr
    hosts_seen = json.loads(done.stdout)["hosts"]
    assert [(h["host"], h["state"]) for h in hosts_seen] == [("local", "live")]  # the group


def test_a_hosts_file_that_is_a_fifo_is_refused_by_the_cli_at_once(tmp_path: Path) -> None:
    hosts, env = config_with_hosts(tmp_path)
    os.mkfifo(hosts)

    done = answered("snapshot", "--hosts", "lab", "--fake", "demo", env=env)

    assert done.returncode == 2, done.stdout + done.stderr
    assert f"Cannot read {hosts}: not a regular file." in done.stderr
    assert "Traceback" not in done.stderr


def test_a_scenario_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "scenario.json"
    os.mkfifo(fifo)
    load = (
        "import sys\n"
        "from gputop.core.fake.scenario import ScenarioError, load_scenario\n"
        "try:\n    load_scenario(sys.argv[1])\n"
        "except ScenarioError as error:\n    print(error)\n"
    )
    try:  # in a child: one blocked on the FIFO is killed at the timeout
        done = subprocess.run(
            [sys.executable, "-c", load, str(fifo)], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        pytest.fail("load_scenario did not answer in 20 s: blocked on the FIFO")

    assert done.stdout == f"Bad scenario {fifo}: not a regular file\n", done.stderr


def test_a_scenario_file_over_the_limit_is_refused_by_name(tmp_path: Path) -> None:
    scenario = tmp_path / "huge.json"
    with scenario.open("wb") as file:  # sparse: costs the disk nothing
        file.truncate(MAX_SCENARIO_BYTES + 1)

    done = answered("snapshot", "--fake", str(scenario), env=env_now())

    assert done.returncode == 2, done.stdout + done.stderr
    assert f"Bad scenario {scenario}: larger than 16 MiB" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_ca_file_that_is_a_fifo_is_refused_by_the_cli_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    argv = ("snapshot", "--prometheus", "https://127.0.0.1:9", "--prometheus-ca", str(fifo))

    done = answered(*argv, env=env_now())

    assert done.returncode == 2, done.stdout + done.stderr
    assert "--prometheus-ca" in done.stderr and "not a regular file" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("fifo_is", ["--tls-cert", "--tls-key"])
def test_an_exporter_tls_file_that_is_a_fifo_is_refused_at_once(
    fifo_is: str, tmp_path: Path
) -> None:
    fifo, other = tmp_path / "fifo.pem", tmp_path / "other.pem"
    os.mkfifo(fifo)
    other.write_text("not read: the FIFO is refused first\n")
    files = {"--tls-cert": other, "--tls-key": other, fifo_is: fifo}
    tls = [word for option, path in files.items() for word in (option, str(path))]

    done = answered("exporter", "--fake", "demo", "--listen", "127.0.0.1:0", *tls, env=env_now())

    assert done.returncode != 0 and f"{fifo_is} {str(fifo)!r}" in done.stderr, done.stderr
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr
