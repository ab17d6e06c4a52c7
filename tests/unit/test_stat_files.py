"""Each GPU process's ``/proc/PID/stat`` kept open between refreshes (``StatFiles``): the
same readings as opening it each time, no descriptor left behind, never another process's
readings under a reused pid."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from helpers.waiting import wait_for

from gputop.core.sampling.host_processes import HostProcessTable
from gputop.core.sampling.proc_counters import Counters, StatFiles, read_proc_stat

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def test_a_live_process_reads_as_with_an_open_each_time_and_its_file_is_kept(
    sleeper: subprocess.Popen[bytes],
) -> None:
    files = StatFiles()
    first = files(sleeper.pid)
    assert first is not None and files.kept == {sleeper.pid}

    def settled() -> tuple[Counters, Counters] | None:
        """The kept file's reading between two direct ones that agree (a process just
        started is still mapping its pages: its RSS moves between two reads)."""
        before, again, after = (
            read_proc_stat(sleeper.pid),
            files(sleeper.pid),
            read_proc_stat(sleeper.pid),
        )
        assert before is not None and again is not None and after is not None
        return (again, after) if before.rss_bytes == after.rss_bytes else None

    again, direct = wait_for(settled, "the sleeper's memory settled")
    assert again.start_mark == direct.start_mark == first.start_mark
    assert again.rss_bytes == direct.rss_bytes
    files.close()
    assert files.kept == frozenset()


def test_a_reaped_process_reads_as_ended_and_leaves_no_descriptor() -> None:
    before = open_descriptors()
    files = StatFiles()
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    assert files(process.pid) is not None or process.poll() is not None
    process.wait()
    assert files(process.pid) is None
    assert files.kept == frozenset()
    assert open_descriptors() == before


def test_a_zombie_reads_as_ended_and_its_file_is_closed() -> None:
    process = subprocess.Popen(["sleep", "0.2"])
    files = StatFiles()
    assert files(process.pid) is not None
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    assert read_proc_stat(process.pid) is None  # a zombie
    assert files(process.pid) is None
    assert files.kept == frozenset()
    process.wait()


def test_a_reused_pid_is_read_for_the_new_process() -> None:
    """The kept file names the process, not the pid: once it is reaped the pid is opened
    again. Simulated by handing the table the file of another process under this pid."""
    first = subprocess.Popen(["sleep", "60"])
    second = subprocess.Popen(["sleep", "60"])
    try:
        files = StatFiles()
        assert files(second.pid) is not None
        # the file kept for first.pid belongs to a process that is then reaped
        files._files[first.pid] = os.open(f"/proc/{second.pid}/stat", os.O_RDONLY)
        second.kill()
        second.wait()
        counters = files(first.pid)
        assert counters is not None
        assert counters.start_mark == read_proc_stat(first.pid).start_mark  # type: ignore[union-attr]
        files.close()
    finally:
        for process in (first, second):
            process.kill()
            process.wait()


def test_beyond_the_limit_processes_are_read_with_an_open_each_time(
    sleeper: subprocess.Popen[bytes],
) -> None:
    other = subprocess.Popen(["sleep", "60"])
    try:
        files = StatFiles(limit=1)
        assert files(sleeper.pid) is not None and files(other.pid) is not None
        assert files.kept == {sleeper.pid}
        assert files(other.pid) is not None  # still read
        files.keep_only({other.pid})
        assert files.kept == frozenset()
    finally:
        other.kill()
        other.wait()


def test_the_table_closes_the_file_of_a_process_it_no_longer_shows(
    sleeper: subprocess.Popen[bytes],
) -> None:
    before = open_descriptors()
    table = HostProcessTable()
    facts = table.describe([sleeper.pid])
    assert facts[sleeper.pid].host_memory_bytes is not None
    assert open_descriptors() == before + 2  # its /proc/PID/stat and its pidfd (exit_watch)
    table.describe([])
    assert open_descriptors() == before
