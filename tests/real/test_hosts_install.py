"""``gputop hosts install`` through the real sshd of the lab tests (tests/helpers/sshd.py).

The wheel is built from this checkout once per module. The "server" is an alias of the test
sshd whose ``python3`` (first on its PATH through ``GPUTOP_PATH``) is a throwaway virtualenv
with the user site on, and whose ``PYTHONUSERBASE`` (sent with ``SetEnv``) is a private
folder: ``pip install --user`` there is real and touches nothing of the machine's. The tests
run offline (only 127.0.0.1): that virtualenv sees gputop's dependencies through a ``.pth``
file naming a copy of this virtualenv's site-packages without gputop itself, and the install
is given ``--pip-args '--no-deps --no-index'`` (the dependencies are already there; a real
server fetches them from the index).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO
from helpers.sshd import SshServer, start_server

from gputop import DISTRIBUTION, __version__
from gputop.cli.main import main
from gputop.core.errors import UsageError
from gputop.core.remote.installer import install_script, judge, wheel_name
from gputop.core.remote.transport import SSH_CONFIG_ENV

ROOT = REPO
OFFLINE = "--pip-args=--no-deps --no-index --no-cache-dir"


def host_python(directory: Path) -> Path:
    """The bin folder of a fresh virtualenv with the user site on and this virtualenv's
    packages, except gputop's own, on its path."""
    venv = directory / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    ours = Path(sysconfig.get_paths()["purelib"])
    deps = directory / "deps"
    deps.mkdir()
    for entry in ours.iterdir():
        if not entry.name.lower().startswith(("gputop", "__editable__")):
            (deps / entry.name).symlink_to(entry)
    venv_site = next((venv / "lib").glob("python3*/site-packages"))
    (venv_site / "gputop_test_deps.pth").write_text(f"{deps}\n")
    return venv / "bin"  # python3 there, and no pip or gputop


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    source = tmp_path_factory.mktemp("source") / "gputop"
    # A copy of the sources, so the build leaves nothing in the checkout; no isolation:
    # the build backend is this virtualenv's setuptools (the tests stay offline).
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".venv", ".git", "*.egg-info", "build", "dist", "tests"),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
    )
    built = out / wheel_name(__version__)
    assert built.is_file(), sorted(p.name for p in out.iterdir())
    return built


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    directory = tmp_path_factory.mktemp("sshd")
    started = start_server(directory)
    yield started
    started.kill()


@pytest.fixture
def install_host(
    server: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Path]]:
    """An alias of the test sshd with its own python3 and its own user base."""
    alias = f"gpu-install-{os.getpid()}-{tmp_path.name}"
    user_base = tmp_path / "userbase"
    server.add_alias(
        alias, f"SetEnv GPUTOP_PATH={host_python(tmp_path)} PYTHONUSERBASE={user_base}"
    )
    monkeypatch.setenv(SSH_CONFIG_ENV, str(server.ssh_config))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user hosts.toml
    yield alias, user_base


def test_install_copies_the_wheel_and_installs_it_with_pip_user(
    install_host: tuple[str, Path], wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alias, user_base = install_host

    code = main(["hosts", "install", "--wheel", str(wheel), OFFLINE, alias])

    out = capsys.readouterr().out
    assert code == 0, out
    assert f"{alias}: ok: installed with pip --user; gputop there: {DISTRIBUTION} " in out
    installed = user_base / "bin" / "gputop"
    environment = {**os.environ, "PYTHONUSERBASE": str(user_base)}
    done = subprocess.run(
        [installed, "--version"], capture_output=True, text=True, check=True, env=environment
    )
    assert done.stdout == f"{DISTRIBUTION} {__version__}\n"  # a wheel: no checkout, no commit


def test_a_failing_pip_says_which_installer_failed_and_what_it_said(
    install_host: tuple[str, Path], wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alias, user_base = install_host

    code = main(["hosts", "install", "--wheel", str(wheel), "--pip-args=--no-such-option", alias])

    out = capsys.readouterr().out
    assert code == 1
    assert f"{alias}: FAILED: pip --user failed (exit 2): " in out
    assert "no such option: --no-such-option" in out
    assert not (user_base / "bin" / "gputop").exists()


def test_each_host_gets_its_own_line_and_an_unreachable_one_says_why(
    install_host: tuple[str, Path], wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alias, _ = install_host

    code = main(
        ["hosts", "install", "--wheel", str(wheel), OFFLINE, "--", "gpu-nokey", alias, "-bad"]
    )

    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert lines[0] == f"Installing {wheel.name} on 3 host(s)..."
    assert lines[1].startswith("gpu-nokey: FAILED: ssh failed: permission denied")
    assert "ssh-copy-id gpu-nokey" in lines[1]
    assert lines[2].startswith(f"{alias}: ok: installed with pip --user")
    assert lines[3].startswith("-bad: FAILED: ")


OLDER_GPUTOP = """#!/bin/sh
# An older gputop on the server: the real agent, its hello saying version 0.0.9.
"{real}" "$@" | sed -u 's/"gputop":"[^"]*"/"gputop":"0.0.9"/'
"""


def test_the_lab_shows_a_host_with_an_older_gputop_what_it_lacks_and_the_command(
    server: SshServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    older = tmp_path / "older-bin"
    older.mkdir()
    (older / "gputop").write_text(OLDER_GPUTOP.format(real=Path(sys.executable).parent / "gputop"))
    (older / "gputop").chmod(0o755)
    alias = f"gpu-older-{tmp_path.name}"
    server.add_alias(
        alias,
        f"SetEnv GPUTOP_FAKE=v100x4 GPUTOP_FAKE_TIME=30 GPUTOP_PATH={older} "
        f"GPUTOP_STATE_DIR={tmp_path / 'state'}",
    )
    monkeypatch.setenv(SSH_CONFIG_ENV, str(server.ssh_config))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    code = main(["snapshot", "--json", "--hosts", alias])

    entry = json.loads(capsys.readouterr().out)["hosts"][0]
    assert code == 0 and entry["state"] == "live", entry["status"]
    assert entry["gputop_version"] == "0.0.9"
    assert f"gputop 0.0.9 there, older than this {__version__} (it lacks " in entry["status"]
    assert entry["status"].endswith(f"update it: gputop hosts install {alias}")


def test_the_wheel_carries_every_file_the_package_reads(wheel: Path) -> None:
    package = ROOT / "gputop"
    data = {
        path.relative_to(ROOT).as_posix()
        for path in package.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc")
    }
    assert data, "the package has data files (scenarios, styles)"

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())

    assert data <= names, sorted(data - names)


def test_pip_options_reach_pip_as_words_and_never_run_as_commands(
    install_host: tuple[str, Path],
    wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alias, _ = install_host
    marker = tmp_path / "ran"
    hostile = f"--pip-args=--no-index --progress-bar=off;touch {marker} $(touch {marker})"

    code = main(["hosts", "install", "--wheel", str(wheel), hostile, alias])

    out = capsys.readouterr().out
    assert code == 1
    assert f"{alias}: FAILED: pip --user failed (exit 2): " in out
    assert not marker.exists()


def test_a_wheel_name_that_is_not_ours_never_reaches_a_script() -> None:
    with pytest.raises(ValueError):
        install_script("gputop_dash-0.1.0-py3-none-any.whl;reboot", [])
    with pytest.raises(UsageError):
        main_error(["hosts", "install", "--wheel", "/tmp/gputop-0.3.0-py3-none-any.whl", "h"])


def main_error(argv: list[str]) -> None:
    from gputop.cli.hosts_command import run_install
    from gputop.cli.main import build_parser

    run_install(build_parser().parse_args(argv))


def test_a_pep_668_python_without_pipx_is_told_to_install_pipx() -> None:
    output = (
        "gputop-install: method pip --user\n"
        "error: externally-managed-environment\n"
        "× This environment is externally managed\n"
    )

    result = judge("gpu1", 1, output, b"")

    assert not result.ok and result.method == "pip --user"
    assert result.detail.startswith("the host's Python is managed by its distribution (PEP 668)")
    assert "apt install pipx" in result.detail
