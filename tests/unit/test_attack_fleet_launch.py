"""``l`` in the fleet dashboard against hostile input: node names a Prometheus exported (an ssh
option, shell words, look-alike letters, 300 characters, nothing) are refused before anything
runs, said in the advice as plain text; an ssh config that is a FIFO (``GPUTOP_SSH_CONFIG``, the
user's config or a file it includes) is no config, and ``l`` does not hang on it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from rich.text import Text

from gputop.core.fleet.model import FleetGpu, FleetNode
from gputop.tui.fleet.fleet_launch import launch_screen, ssh_destination

HOSTILE = ["-oProxyCommand=x", "a;b", "gpu1\x1b]0;owned\x07", "gрu1", "ＧＰＵ1", "x" * 300, ""]
"""``gрu1``: a Cyrillic ``р``; ``ＧＰＵ1``: full-width letters."""


def node(host: str) -> FleetNode:
    gpu = FleetGpu("0", index=0, uuid="GPU-1234abcd", free=True)
    return FleetNode(host or "i:9400", "gputop", 1.0, hostnames={host: 1}, gpus={"0": gpu})


@pytest.mark.parametrize("host", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_node_name_is_refused_and_said_plainly(host: str, tmp_path: Path) -> None:
    ssh = tmp_path / ".ssh"
    ssh.mkdir()
    (ssh / "config").write_text("Host *\nHost gpu1 -* *;* a*\n")  # the user names them all
    shown = launch_screen(node(host), 0.0, {"HOME": str(tmp_path), "PATH": ""})
    assert isinstance(shown, Text)  # the advice, never the launch dialog
    assert "not a plain host name" in shown.plain and "\x1b" not in shown.plain


def answers_within(call: object, fifo: Path) -> bool:
    """Whether ``call`` returns within 10 s; a reader still blocked on ``fifo`` is let go."""
    worker = threading.Thread(target=call, daemon=True)  # type: ignore[arg-type]
    worker.start()
    worker.join(10.0)
    hung = worker.is_alive()
    if hung:  # a writer that closes at once: the blocked open returns, the read sees EOF
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10.0)
    return not hung


def test_an_ssh_config_that_is_a_fifo_is_no_config(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    ssh = tmp_path / ".ssh"
    ssh.mkdir()
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    found: list[bool] = []
    given = {**home, "GPUTOP_SSH_CONFIG": str(fifo)}
    assert answers_within(lambda: found.append(ssh_destination("gpu1", given)), fifo)
    (ssh / "config").write_text(f"Host gpu1\nInclude {fifo}\n")
    assert answers_within(lambda: found.append(ssh_destination("gpu1", home)), fifo)
    assert found == [False, True]  # the FIFO names nothing; the config beside it still does


def test_a_hosts_toml_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    from gputop.core.remote.hosts import HostsFileError, load_groups

    fifo = tmp_path / "hosts.toml"
    os.mkfifo(fifo)
    outcome: list[object] = []

    def load() -> None:
        try:
            outcome.append(load_groups(fifo))
        except HostsFileError as error:
            outcome.append(str(error))

    assert answers_within(load, fifo)  # blocked in open() before, until a writer came
    assert outcome and "not a regular file" in str(outcome[0])


def test_an_ssh_config_whose_includes_fan_out_is_read_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty files that each include all twenty (and the config itself): ssh reads each
    once here, not 20**4 times while the dashboard waits; a Host in any of them still counts."""
    import gputop.tui.fleet.fleet_launch as fleet_launch

    ssh = tmp_path / ".ssh"
    (ssh / "d").mkdir(parents=True)
    (ssh / "config").write_text("Include d/*\nInclude config\n")
    for i in range(20):
        (ssh / "d" / f"{i:02}").write_text(f"Host h{i}\nInclude d/*\nInclude ~/.ssh/config\n")
    reads: list[object] = []
    real = fleet_launch.read_regular_file

    def counted(path: object, limit: int) -> object:
        reads.append(path)
        return real(path, limit)  # type: ignore[arg-type]

    monkeypatch.setattr(fleet_launch, "read_regular_file", counted)
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    assert ssh_destination("h19", home) and not ssh_destination("h20", home)
    assert len(reads) <= 2 * 21  # each of the 21 files once per question
