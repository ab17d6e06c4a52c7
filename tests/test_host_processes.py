"""Host facts for GPU processes come from psutil, cached per process."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gputop.core.host_processes import FOREIGN_HINT, HostFacts, HostProcessTable
from gputop.core.model import ProcessOrigin

UNUSED_PID = 4_194_303  # the largest pid Linux can hand out; never a live process in tests


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()
    child.wait()


def test_a_live_process_is_described_by_the_host(sleeper: subprocess.Popen[bytes]) -> None:
    facts = HostProcessTable().describe([sleeper.pid])[sleeper.pid]
    assert facts.origin is ProcessOrigin.HOST
    assert facts.user == getpass.getuser()
    assert facts.command[0] == sys.executable
    assert facts.host_memory_bytes is not None and facts.host_memory_bytes > 0
    assert facts.start_time is not None


def test_cpu_percent_appears_from_the_second_refresh(sleeper: subprocess.Popen[bytes]) -> None:
    table = HostProcessTable()
    first = table.describe([sleeper.pid])[sleeper.pid]
    second = table.describe([sleeper.pid])[sleeper.pid]
    assert first.cpu_percent is None
    assert second.cpu_percent is not None and second.cpu_percent >= 0


def test_a_pid_that_does_not_exist_here_is_foreign_with_a_hint() -> None:
    facts = HostProcessTable().describe([UNUSED_PID])[UNUSED_PID]
    assert facts.origin is ProcessOrigin.FOREIGN
    assert facts.hint == FOREIGN_HINT
    assert facts.user is None


def test_a_simulated_pid_is_described_by_the_scenario() -> None:
    simulated = HostFacts(ProcessOrigin.SIMULATED, user="alice", command=("python", "x.py"))
    table = HostProcessTable(simulated=lambda pid: simulated if pid == UNUSED_PID else None)
    assert table.describe([UNUSED_PID])[UNUSED_PID] == simulated


def test_the_host_wins_over_the_scenario_for_a_live_pid() -> None:
    simulated = HostFacts(ProcessOrigin.SIMULATED, user="alice", command=("python", "x.py"))
    table = HostProcessTable(simulated=lambda pid: simulated)
    facts = table.describe([os.getpid()])[os.getpid()]
    assert facts.origin is ProcessOrigin.HOST
    assert facts.user == getpass.getuser()


def test_a_vanished_process_is_no_longer_described_as_live() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    table = HostProcessTable()
    table.describe([child.pid])
    child.wait()
    assert table.describe([child.pid])[child.pid].origin is ProcessOrigin.FOREIGN


def test_processes_no_longer_reported_are_forgotten(sleeper: subprocess.Popen[bytes]) -> None:
    table = HostProcessTable()
    table.describe([sleeper.pid, os.getpid()])
    table.describe([os.getpid()])
    # Asking again starts a new CPU counter: proof the old entry was dropped.
    assert table.describe([sleeper.pid])[sleeper.pid].cpu_percent is None
