"""The lab's t/T over a real sshd after a step of the host's clock: the host's snapshot
carries its boot id, and ``gputop signal`` there, given the process's start ticks with it,
reaches the process whose start time the snapshot gave before the step (refused by that
start time alone)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.sshd import SshServer, start_server

from gputop.core.process_control import current_boot_id, process_start
from gputop.core.remote.host_link import HostLink
from gputop.core.remote.remote_jobs import run_remote, signal_argv
from gputop.core.remote.status import LinkState
from gputop.core.remote.transport import SSH_CONFIG_ENV

STEP_S = 3600.0
HOST = "gpu-v100"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshServer]:
    started = start_server(tmp_path)
    monkeypatch.setenv(SSH_CONFIG_ENV, str(started.ssh_config))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    yield started
    started.kill()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def test_the_hosts_snapshot_carries_its_boot_id(server: SshServer) -> None:
    link = HostLink(HOST, interval_s=0.5, first_retry_s=0.2, max_retry_s=1.0).start()
    try:
        assert link.wait_for(lambda s: s.state is LinkState.LIVE, 30), link.status()
        snapshot = link.status().snapshot
    finally:
        link.stop()

    assert snapshot is not None and snapshot.boot_id is not None
    assert snapshot.boot_id == current_boot_id()  # the server is this machine


def test_a_lab_signal_by_ticks_reaches_the_process_after_a_step_of_the_hosts_clock(
    server: SshServer, sleeper: subprocess.Popen[bytes]
) -> None:
    started = process_start(sleeper.pid)
    boot = current_boot_id()
    assert started.time is not None and started.ticks is not None and boot is not None
    shown = started.time - STEP_S  # the start time the snapshot gave, before the step

    by_time = run_remote(signal_argv(HOST, sleeper.pid, shown, "SIGTERM"))
    assert not by_time.ok and sleeper.poll() is None, by_time.message  # as before
    by_ticks = run_remote(
        signal_argv(HOST, sleeper.pid, shown, "SIGTERM", None, started.ticks, boot)
    )

    assert by_ticks.ok, by_ticks.message
    assert sleeper.wait(10) == -15
