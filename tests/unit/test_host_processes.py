"""Host facts for GPU processes come from psutil, cached per process."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import PIPE

import psutil
import pytest

from gputop.core.model import ProcessOrigin
from gputop.core.sampling import host_processes
from gputop.core.sampling.host_processes import FOREIGN_HINT, HostFacts, HostProcessTable
from gputop.core.sampling.proc_counters import CounterReader, Counters, read_proc_stat, read_psutil

UNUSED_PID = 4_194_303  # the largest pid Linux can hand out; never a live process in tests


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process, started and idle (its memory no longer grows)."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
        stdout=PIPE,
    )
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
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


# -- the cache: static facts once per process, one read of what changes per refresh -------


def about_equal(a: int, b: int) -> bool:
    """Resident memory read twice: the kernel's counters of a starting process move a little."""
    return abs(a - b) <= 0.1 * max(a, b)


class TableReading(HostProcessTable):
    """A table whose counters (and clock) are the test's own."""

    def __init__(self, reader: CounterReader, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.reader = reader
        self.clock = clock

    def read_counters(self, pid: int) -> Counters | None:
        return self.reader(pid)

    def now(self) -> float:
        return self.clock()


def counting(reader: CounterReader, calls: list[int]) -> CounterReader:
    def read(pid: int) -> Counters | None:
        calls.append(pid)
        return reader(pid)

    return read


def test_static_facts_are_read_once_per_process(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    cmdline_reads: list[str] = []
    real_read = host_processes._read_whole

    def read_whole(path: str) -> bytes:
        if path.endswith("/cmdline"):
            cmdline_reads.append(path)
        return real_read(path)

    monkeypatch.setattr(host_processes, "_read_whole", read_whole)
    table = HostProcessTable()
    for _ in range(3):
        assert table.describe([sleeper.pid])[sleeper.pid].command[0] == sys.executable
    assert cmdline_reads == [f"/proc/{sleeper.pid}/cmdline"]


def test_each_refresh_reads_the_counters_of_a_process_once(
    sleeper: subprocess.Popen[bytes],
) -> None:
    reads: list[int] = []
    table = TableReading(counting(read_proc_stat, reads))
    for _ in range(3):
        table.describe([sleeper.pid, os.getpid()])
    assert sorted(reads) == sorted([sleeper.pid, os.getpid()] * 3)


def test_a_process_that_exits_is_dropped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=PIPE)
    table = HostProcessTable()
    table.describe([child.pid])
    assert child.pid in table.tracked_pids
    child.communicate(b"")
    assert table.describe([child.pid])[child.pid].origin is ProcessOrigin.FOREIGN
    assert child.pid not in table.tracked_pids


def test_a_pid_with_another_start_time_is_described_afresh(
    sleeper: subprocess.Popen[bytes],
) -> None:
    """The counters say the process started at another time: its pid was reused."""
    shift = [0.0]

    def reader(pid: int) -> Counters | None:
        counters = read_proc_stat(pid)
        assert counters is not None
        return Counters(counters.cpu_time_s, counters.rss_bytes, counters.start_mark + shift[0])

    table = TableReading(reader)
    table.describe([sleeper.pid])
    assert table.describe([sleeper.pid])[sleeper.pid].cpu_percent is not None
    shift[0] = 1.0
    fresh = table.describe([sleeper.pid])[sleeper.pid]
    assert fresh.cpu_percent is None  # a new process: its CPU counter starts again
    assert fresh.command[0] == sys.executable


SECOND = (sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)")


def reused_pid(table: HostProcessTable, wait_a_tick: bool) -> tuple[HostFacts, HostFacts]:
    """The table's facts of a process ("first"), then of another ("second") given its pid
    when it ended (``wait_a_tick``: a clock tick later, so their start times differ)."""
    next_pid = Path("/proc/sys/kernel/ns_last_pid")
    if not os.access(next_pid, os.W_OK):
        pytest.skip("giving a new process a chosen pid needs root (/proc/sys/kernel/ns_last_pid)")
    for _ in range(20):  # other processes on the machine may take the pid first
        first = subprocess.Popen([*SECOND, "first"], stdout=PIPE)
        assert first.stdout is not None and first.stdout.readline() == b"ready\n"  # exec done
        pid = first.pid
        before = table.describe([pid])[pid]
        first.kill()
        first.wait()
        if wait_a_tick:
            time.sleep(0.05)  # start times count in clock ticks (10 ms): let one pass
        next_pid.write_text(str(pid - 1))
        second = subprocess.Popen([*SECOND, "second"], stdout=PIPE)
        if second.pid == pid:
            assert second.stdout is not None and second.stdout.readline() == b"ready\n"
            break
        second.kill()
        second.wait()
    else:
        pytest.skip("another process took the freed pid 20 times in a row")
    try:
        after = table.describe([pid])[pid]
    finally:
        second.kill()
        second.wait()
    return before, after


def test_a_pid_reused_by_a_new_process_gets_fresh_static_facts() -> None:
    before, after = reused_pid(HostProcessTable(), wait_a_tick=True)
    assert before.command[0] == sys.executable and before.command[-1] == "first"
    assert after.command[-1] == "second"
    assert after.cpu_percent is None


def test_a_process_caught_mid_exec_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Between a process's exec and the kernel setting up its arguments, its command line
    reads empty; that reading is not kept for its lifetime."""
    sleeper = subprocess.Popen([*SECOND, "third"], stdout=PIPE)
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline() == b"ready\n"
        # The first refresh reads /proc itself, then asks psutil (which names the
        # process): both see the empty command line.
        real, real_psutil = host_processes._read_whole, psutil.Process.cmdline
        calls: list[str] = []

        def empty_once(path: str) -> bytes:
            if not path.endswith("/cmdline"):
                return real(path)
            calls.append(path)
            return b"" if len(calls) == 1 else real(path)

        def psutil_empty_once(self: psutil.Process) -> list[str]:
            calls.append("psutil")
            return [] if calls == [calls[0], "psutil"] else real_psutil(self)

        monkeypatch.setattr(host_processes, "_read_whole", empty_once)
        monkeypatch.setattr(psutil.Process, "cmdline", psutil_empty_once)
        table = HostProcessTable()
        first = table.describe([sleeper.pid])[sleeper.pid]
        assert first.command[0].startswith("[") and first.command[0].endswith("]")
        second = table.describe([sleeper.pid])[sleeper.pid]
        assert second.command[-1] == "third"
        assert second.cpu_percent is not None  # the same process: its CPU counter went on
        third = table.describe([sleeper.pid])[sleeper.pid]
        assert len(calls) == 3 and third.command == second.command  # settled: not read again
    finally:
        sleeper.kill()
        sleeper.wait()


def test_cpu_percent_is_cpu_time_over_wall_time_between_refreshes() -> None:
    cpu_time_s = iter([10.0, 10.5, 12.5])
    clock_s = iter([100.0, 101.0, 103.0])
    pid = os.getpid()

    def reader(asked: int) -> Counters | None:
        return Counters(next(cpu_time_s), rss_bytes=1 << 20, start_mark=1.0)

    table = TableReading(reader, clock=lambda: next(clock_s))
    readings = [table.describe([pid])[pid].cpu_percent for _ in range(3)]
    assert readings == [None, 50.0, 100.0]


def test_proc_stat_is_read_right_when_the_command_name_has_parentheses() -> None:
    rename = "open('/proc/self/comm', 'w').write('a) b (c'); import sys; sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", rename], stdin=PIPE, stdout=PIPE)
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(child.pid).name() != "a) b (c" and time.monotonic() < deadline:
            time.sleep(0.01)
        counters = read_proc_stat(child.pid)
        assert counters is not None
        assert about_equal(counters.rss_bytes, psutil.Process(child.pid).memory_info().rss)
        started = psutil.boot_time() + counters.start_mark / os.sysconf("SC_CLK_TCK")
        assert abs(started - psutil.Process(child.pid).create_time()) < 0.05
    finally:
        child.communicate(b"")


def test_psutil_reads_the_same_counters_where_there_is_no_proc(
    sleeper: subprocess.Popen[bytes],
) -> None:
    from_proc, from_psutil = read_proc_stat(sleeper.pid), read_psutil(sleeper.pid)
    assert from_proc is not None and from_psutil is not None
    assert about_equal(from_psutil.rss_bytes, from_proc.rss_bytes)
    assert abs(from_psutil.cpu_time_s - from_proc.cpu_time_s) < 0.5
    facts = TableReading(read_psutil).describe([sleeper.pid])[sleeper.pid]
    assert facts.command[0] == sys.executable
    assert facts.host_memory_bytes is not None
    assert about_equal(facts.host_memory_bytes, from_proc.rss_bytes)


def test_an_ended_process_has_no_counters() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert read_proc_stat(child.pid) is None and read_psutil(child.pid) is None


ODD_ARGUMENTS = ("two words", "tab\there", "cr\rlf\r\n", "ünï", "", "(paren")


def test_static_facts_read_from_proc_are_the_ones_psutil_reads() -> None:
    """The first sample reads a new process's user, command line and start from /proc
    itself (a quarter of psutil's cost): the same values psutil gives, odd arguments
    (spaces, tabs, carriage returns, non-UTF-8 bytes, an empty one) included."""
    child = subprocess.Popen([*SECOND, *ODD_ARGUMENTS, os.fsdecode(b"raw\xff")], stdout=PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        facts = HostProcessTable().describe([child.pid])[child.pid]
        process = psutil.Process(child.pid)
        assert facts.origin is ProcessOrigin.HOST
        assert facts.user == process.username()
        assert facts.command == tuple(process.cmdline())
        assert facts.start_time == process.create_time()
    finally:
        child.kill()
        child.wait()


def test_a_title_rewritten_with_spaces_is_split_as_psutil_splits_it() -> None:
    split = host_processes._split_command_line
    assert split(b"python train.py --lr 1\x00") == ("python", "train.py", "--lr", "1")
    assert split(b"a\x00b c\x00") == ("a", "b c")
    assert split(b"postgres: writer process   ") == ("postgres:", "writer", "process", "", "")
    assert split(b"") == ()


def test_a_thread_id_is_not_taken_for_a_process() -> None:
    """kill(tid, 0) succeeds for a thread; as psutil's pid_exists, a thread's id is not a
    process of this host."""
    code = (
        "import threading, time\n"
        "ready = threading.Event()\n"
        "def run():\n"
        "    print(threading.get_native_id(), flush=True); time.sleep(60)\n"
        "threading.Thread(target=run, daemon=True).start(); time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=PIPE)
    try:
        assert child.stdout is not None
        tid = int(child.stdout.readline())
        assert tid != child.pid and not psutil.pid_exists(tid)
        facts = HostProcessTable().describe([tid])[tid]
        assert facts.origin is ProcessOrigin.FOREIGN and facts.hint == FOREIGN_HINT
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("pid", [0, -1, 2**40])
def test_a_pid_no_process_can_have_is_foreign(pid: int) -> None:
    """kill(0 or -1, 0) would ask about a group or every process: never a process here."""
    facts = HostProcessTable().describe([pid])[pid]
    assert facts.origin is ProcessOrigin.FOREIGN


# -- out of sight: carried over while a pidfd proves it the same process (issue 44) -------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_process_out_of_sight_is_read_once_a_carry_period(
    sleeper: subprocess.Popen[bytes],
) -> None:
    reads: list[int] = []
    clock = Clock()
    table = TableReading(counting(read_proc_stat, reads), clock)
    table.shown = frozenset()
    first = table.describe([sleeper.pid])[sleeper.pid]
    for _ in range(4):  # 1 to 4 s later: under CARRY_S
        clock.now += 1.0
        assert table.describe([sleeper.pid])[sleeper.pid] is first
    assert reads == [sleeper.pid]
    clock.now += 1.0  # CARRY_S since the read: read again, its CPU over those 5 s
    again = table.describe([sleeper.pid])[sleeper.pid]
    assert reads == [sleeper.pid] * 2
    assert again.cpu_percent is not None and again.command == first.command


def test_a_shown_process_is_read_every_refresh(sleeper: subprocess.Popen[bytes]) -> None:
    reads: list[int] = []
    table = TableReading(counting(read_proc_stat, reads))
    table.shown = frozenset({sleeper.pid})
    for _ in range(3):
        table.describe([sleeper.pid, os.getpid()])
    assert sorted(reads) == sorted([sleeper.pid] * 3 + [os.getpid()])


def test_with_nothing_said_about_what_is_shown_every_process_is_read(
    sleeper: subprocess.Popen[bytes],
) -> None:
    reads: list[int] = []
    table = TableReading(counting(read_proc_stat, reads))
    assert table.shown is None  # the exporter, snapshots, the lab's agent
    for _ in range(3):
        table.describe([sleeper.pid])
    assert reads == [sleeper.pid] * 3


def test_a_process_out_of_sight_that_ended_is_not_carried_over() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=PIPE)
    table = HostProcessTable()
    table.shown = frozenset()
    assert table.describe([child.pid])[child.pid].origin is ProcessOrigin.HOST
    child.communicate(b"")
    assert table.describe([child.pid])[child.pid].origin is ProcessOrigin.FOREIGN
    assert child.pid not in table.tracked_pids


def test_a_zombie_out_of_sight_is_not_carried_over() -> None:
    """Ended but not reaped: its pid is still taken, its pidfd readable."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=PIPE)
    table = HostProcessTable()
    table.shown = frozenset()
    table.describe([child.pid])
    assert child.stdin is not None
    child.stdin.close()
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.01)
    try:
        assert table.describe([child.pid])[child.pid].origin is ProcessOrigin.FOREIGN
    finally:
        child.wait()


def test_a_process_that_cannot_be_watched_is_read_every_refresh(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(pid: int, flags: int = 0) -> int:
        raise OSError(24, "Too many open files")  # EMFILE; ENOSYS and EPERM alike

    monkeypatch.setattr(os, "pidfd_open", refused)
    reads: list[int] = []
    table = TableReading(counting(read_proc_stat, reads))
    table.shown = frozenset()
    for _ in range(3):
        table.describe([sleeper.pid])
    assert reads == [sleeper.pid] * 3


def test_past_the_watch_limit_the_rest_are_read_every_refresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gputop.core.sampling import exit_watch

    monkeypatch.setattr(exit_watch, "WATCHED_MAX", 2)
    children = [
        subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=PIPE)
        for _ in range(4)
    ]
    try:
        pids = [child.pid for child in children]
        reads: list[int] = []
        table = TableReading(counting(read_proc_stat, reads))
        table.shown = frozenset()
        for _ in range(3):
            table.describe(pids)
        counts = sorted(reads.count(pid) for pid in pids)
        assert counts == [1, 1, 3, 3]  # two watched and carried, two read each time
        assert _open_pidfds() == 2
    finally:
        for child in children:
            child.communicate(b"")
    del table
    import gc

    gc.collect()
    assert _open_pidfds() == 0


def _open_pidfds() -> int:
    """This process's open pidfds (``/proc/self/fd`` links to ``anon_inode:[pidfd]``)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[pidfd]"
        except OSError:
            continue
    return count


def test_the_pidfds_of_processes_no_longer_asked_about_are_closed(
    sleeper: subprocess.Popen[bytes],
) -> None:
    table = HostProcessTable()
    table.shown = frozenset()
    before = _open_pidfds()
    table.describe([sleeper.pid, os.getpid()])
    assert _open_pidfds() == before + 2
    table.describe([os.getpid()])
    assert _open_pidfds() == before + 1
    table.close()
    assert _open_pidfds() == before


@pytest.mark.parametrize("shown", [None, frozenset()], ids=["shown", "out of sight"])
def test_a_pid_reused_in_the_same_clock_tick_is_described_afresh(
    shown: frozenset[int] | None,
) -> None:
    """The start time counts in clock ticks (10 ms): a pid reused within one cannot be told
    from its last process by it. The pidfd tells them apart: here every start reads the
    same, so only the pidfd can (without it the first process's command stays)."""

    def same_start(pid: int) -> Counters | None:
        counters = read_proc_stat(pid)
        return None if counters is None else counters._replace(start_mark=1.0)

    table = TableReading(same_start)
    table.shown = shown
    before, after = reused_pid(table, wait_a_tick=False)
    assert before.command[-1] == "first"
    assert after.command[-1] == "second"
    assert after.cpu_percent is None
