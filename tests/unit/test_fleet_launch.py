"""Which fleet nodes ``l`` launches on over ssh (gputop/tui/fleet/fleet_launch.py): a plain
host name that hosts.toml or the ssh config names; the ssh config's patterns as ssh reads
them. The launch itself: tests/real/test_fleet_launch_sshd.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.tui.fleet.fleet_launch import plain_host_name, ssh_destination


@pytest.mark.parametrize("name", ["gpu1", "node-07.cluster.example", "a", "10.0.0.7"])
def test_plain_host_names(name: str) -> None:
    assert plain_host_name(name)


@pytest.mark.parametrize(
    "name",
    ["", "-oProxyCommand=x", "a b", "a;b", "user@gpu1", "gpu1:22", "gpu-", "a..b", "x" * 254],
)
def test_names_that_are_not_plain_host_names(name: str) -> None:
    assert not plain_host_name(name)


def test_named_by_the_ssh_config_or_hosts_toml(tmp_path: Path) -> None:
    ssh = tmp_path / ".ssh"
    ssh.mkdir()
    (ssh / "config").write_text(
        "Host *\n  ServerAliveInterval 5\nHost gpu-* !gpu-bad\n  User me\nInclude more.conf\n"
    )
    (ssh / "more.conf").write_text("Host=dgx1\n")
    (tmp_path / "gputop").mkdir()
    (tmp_path / "gputop" / "hosts.toml").write_text('[groups]\nlab = ["big-box"]\n')
    environ = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    assert ssh_destination("gpu-7", environ)
    assert ssh_destination("GPU-7", environ)  # ssh matches the name in lower case
    assert ssh_destination("dgx1", environ)  # from the included file
    assert ssh_destination("big-box", environ)  # from hosts.toml
    assert not ssh_destination("gpu-bad", environ)  # negated
    assert not ssh_destination("other", environ)  # only the lone '*' matches it
    given = tmp_path / "lab_ssh_config"
    given.write_text("Host other\n")
    assert ssh_destination("other", {**environ, "GPUTOP_SSH_CONFIG": str(given)})
