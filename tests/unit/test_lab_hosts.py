"""Host lists, groups from hosts.toml, ssh's command line and its failures in words."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.core.errors import UsageError
from gputop.core.remote.hosts import HostsFileError, config_path, load_groups, resolve_hosts
from gputop.core.remote.transport import classify_failure, ssh_argv


def write_hosts(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gputop" / "hosts.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_hosts_file_lives_in_the_xdg_config_directory(tmp_path: Path) -> None:
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "gputop" / "hosts.toml"
    assert config_path({"XDG_CONFIG_HOME": "relative", "HOME": "/home/u"}) == Path(
        "/home/u/.config/gputop/hosts.toml"
    )


def test_a_group_expands_to_its_hosts_in_order_each_once(tmp_path: Path) -> None:
    groups = load_groups(write_hosts(tmp_path, '[groups]\nlab = ["gpu1", "gpu2", "local"]\n'))

    entries = resolve_hosts("gpu2,lab,gpu3", groups)

    assert [e.name for e in entries] == ["gpu2", "gpu1", "local", "gpu3"]
    assert [e.local for e in entries] == [False, False, True, False]


def test_a_missing_hosts_file_means_no_groups(tmp_path: Path) -> None:
    assert load_groups(tmp_path / "none.toml") == {}


def test_a_bad_hosts_file_names_the_file_and_the_fix(tmp_path: Path) -> None:
    path = write_hosts(tmp_path, '[groups]\nlab = "gpu1"\n')

    with pytest.raises(HostsFileError, match=r"groups.lab must be a list of host names"):
        load_groups(path)


def test_a_hosts_file_that_is_not_toml_says_so(tmp_path: Path) -> None:
    path = write_hosts(tmp_path, "[groups\n")

    with pytest.raises(HostsFileError, match="is not valid TOML"):
        load_groups(path)


@pytest.mark.parametrize("name", ["-oProxyCommand=sh", "a b", "gpu\x1b]0;x", "x;y"])
def test_a_name_ssh_would_misread_is_kept_with_a_problem(name: str) -> None:
    (entry,) = resolve_hosts(name, {})

    assert entry.problem is not None and "not a host name" in entry.problem
    assert "\x1b" not in entry.problem


def test_empty_hosts_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        resolve_hosts(" , ", {})


def test_ssh_never_prompts_and_takes_the_users_config_and_options() -> None:
    argv = ssh_argv(
        "gpu1",
        "sh -c 'x'",
        {"GPUTOP_SSH_CONFIG": "/tmp/cfg", "GPUTOP_SSH_OPTIONS": "-J bastion -o Port=2222"},
    )

    assert argv[:7] == ["ssh", "-F", "/tmp/cfg", "-J", "bastion", "-o", "Port=2222"]
    assert "BatchMode=yes" in argv
    assert argv[-3:] == ["--", "gpu1", "sh -c 'x'"]


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        (
            "@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n",
            "host-key-changed",
        ),
        (
            "No ED25519 host key is known for gpu1 and you have requested strict checking.\n"
            "Host key verification failed.",
            "host-key",
        ),
        ("root@127.0.0.1: Permission denied (publickey).", "auth"),
        ("ssh: Could not resolve hostname gpu1: Name or service not known", "resolve"),
        ("ssh: connect to host 10.0.0.1 port 22: Connection timed out", "timeout"),
        ("ssh: connect to host 127.0.0.1 port 1: Connection refused", "refused"),
    ],
)
def test_ssh_failures_are_classified(stderr: str, kind: str) -> None:
    assert classify_failure("gpu1", stderr, 255).kind == kind


def test_a_remote_command_not_found_says_how_to_install_gputop() -> None:
    failure = classify_failure("gpu1", "sh: 1: gputop: not found", 127)

    assert failure.kind == "no-gputop"
    assert failure.advice == "install gputop there from here: gputop hosts install gpu1"


def _snapshot_of_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: str
) -> tuple[int, str, str]:
    """``gputop --fake demo snapshot --hosts SPEC`` as a person runs it, with the hosts.toml
    of ``tmp_path``; (exit status, stdout, stderr)."""
    from gputop.cli.main import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("GPUTOP_DEBUG", raising=False)
    status = main(["--fake", "demo", "snapshot", "--hosts", spec])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("nesting", ["[", "{ a = "])
def test_a_hosts_file_nested_too_deeply_is_a_message_not_an_internal_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    nesting: str,
) -> None:
    # A hosts.toml of 100,000 '[' (well under its 1 MiB bound): Python's TOML reader
    # recurses once a level and raised RecursionError, which ended 'gputop snapshot
    # --hosts lab' in "internal error" (exit 70).
    write_hosts(tmp_path, "[groups]\nlab = " + nesting * 100_000 + "\n")

    status, out, err = _snapshot_of_hosts(tmp_path, monkeypatch, capsys, "lab")

    assert status == 2, err
    assert "internal error" not in err
    assert "hosts.toml is not valid TOML" in err and "nested too deeply" in err
    assert out == ""


def test_a_group_that_lists_no_host_is_said_not_an_empty_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 'lab = []' in hosts.toml: 'gputop snapshot --hosts lab' printed an empty line and
    # exited 1 with no word of why ('pick --hosts lab': "No host has 1 free GPU: ").
    write_hosts(tmp_path, "[groups]\nlab = []\n")

    status, out, err = _snapshot_of_hosts(tmp_path, monkeypatch, capsys, "lab")

    assert status == 2
    assert "the group 'lab'" in err and "lists no hosts" in err and "hosts.toml" in err
    assert out == ""
    # a group with hosts beside it is fine: the other names are watched
    assert [e.name for e in resolve_hosts("lab,gpu1", {"lab": []})] == ["gpu1"]
