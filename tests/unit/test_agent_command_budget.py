"""All the commands of one agent snapshot share a budget of bytes on the wire.

Each command was cut to 4,096 characters, but about 150 GPU processes of 4 KB commands
(any user of a host can start them), sent every 0.2 s, were 37 MB within the lab's 10 s
window: more than the 32 MiB past which the lab drops a host as a flood. The budget is a
share of that flood bound at the agent's interval; past it the longest commands are cut
further (each keeps its start), the short ones whole, no process dropped, the numbers kept.
"""

from __future__ import annotations

import io
import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.core.model import Snapshot
from gputop.core.remote import agent, host_link, protocol
from gputop.core.remote.agent import (
    FASTEST_INTERVAL_S,
    MIN_COMMAND_BYTES,
    command_budget,
    cut_to_bytes,
    for_reader,
    run_agent,
    wire_bytes,
)
from gputop.core.sampling.nvml_backend import NvmlBackend

PATH_ARG = "/" + "/".join(["zqzqzqzq"] * 450)
"""A path of 4,050 characters (the redactor keeps paths): a command of 4 KB with the rest."""
EMOJI_ARG = "\U0001f600" * 4000
"""4,000 characters, 12 bytes each on the wire (``\\ud83d\\ude00``)."""


def _hostile(
    sample: Snapshot, processes: int, arg: str, gpus: int = 8, user: str = "alice"
) -> Snapshot:
    """``sample``'s first card ``gpus`` times, ``processes`` processes of 4 KB commands
    spread over them (each with its own numbers)."""
    card = sample.gpus[0]
    template = card.processes[0]
    cards = []
    for index in range(gpus):
        mine = [n for n in range(processes) if n % gpus == index]
        listed = tuple(
            replace(
                template,
                pid=1000 + n,
                physical_index=index,
                user=user,
                used_memory_bytes=(n + 1) << 20,
                command=("python", "train.py", "--data", arg, f"--rank={n}"),
            )
            for n in mine
        )
        cards.append(replace(card, physical_index=index, processes=listed))
    return replace(sample, gpus=tuple(cards))


class _Backend:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def sample(self) -> Snapshot:
        return self.snapshot


class _Snapshots(threading.Event):
    """Set once ``count`` intervals have passed; its waits return at once."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.left = count

    def wait(self, timeout: float | None = None) -> bool:
        self.left -= 1
        if self.left <= 0:
            self.set()
        return self.is_set()


def _agent_lines(snapshot: Snapshot, interval_s: float, count: int) -> list[str]:
    """What ``gputop agent --interval interval_s`` writes for ``count`` intervals."""
    out = io.StringIO()
    backend: Any = _Backend(snapshot)
    run_agent(backend, interval_s, out, _Snapshots(count), lambda: ([], None))
    return out.getvalue().splitlines(keepends=True)


def _dropped_as_a_flood(
    lines: list[str], interval_s: float, monkeypatch: pytest.MonkeyPatch
) -> str | None:
    """The lab's flood gauge (host_link) fed the lines a snapshot an interval, for 30 s."""
    clock = [1000.0]
    monkeypatch.setattr(host_link.time, "monotonic", lambda: clock[0])
    gauge = host_link._FloodGauge()
    hello, snapshot, *rest = lines
    for line in (hello, *rest):
        assert not gauge.over(len(line.encode()))
    for _ in range(int(30 / interval_s)):
        clock[0] += interval_s
        if gauge.over(len(snapshot.encode())):
            return gauge.failure().reason
    return None


@pytest.mark.parametrize("reader", ["alice", "root"], ids=["own-whole", "redacted"])
@pytest.mark.parametrize(
    ("processes", "arg", "gpus"),
    [(150, PATH_ARG, 8), (400, PATH_ARG, 8), (150, EMOJI_ARG, 8), (600, EMOJI_ARG, 16)],
    ids=["150-paths", "400-paths", "150-emoji", "600-emoji-16-cards"],
)
def test_many_processes_of_long_commands_at_the_fastest_interval_are_no_flood(
    fake_backend: Callable[..., NvmlBackend],
    monkeypatch: pytest.MonkeyPatch,
    reader: str,
    processes: int,
    arg: str,
    gpus: int,
) -> None:
    hostile = _hostile(fake_backend("demo").sample(), processes, arg, gpus)
    monkeypatch.setattr(agent, "own_user_name", lambda: reader)

    lines = _agent_lines(hostile, FASTEST_INTERVAL_S, 3)

    snapshot_line = lines[1]
    assert snapshot_line.startswith('{"type":"snapshot"')
    # before: 150 paths 733 KB a snapshot, dropped after 9.2 s ("sent 32 MiB in 47 lines
    # within 10 s"); 150 emoji 7.3 MB a snapshot, dropped at the fifth
    assert _dropped_as_a_flood(lines, FASTEST_INTERVAL_S, monkeypatch) is None
    sent = protocol.snapshot_from_json(protocol.decode(snapshot_line).body["snapshot"])
    shown = [p for gpu in sent.gpus for p in gpu.processes]
    expected = [p for gpu in hostile.gpus for p in gpu.processes]
    assert [(p.pid, p.used_memory_bytes) for p in shown] == [
        (p.pid, p.used_memory_bytes) for p in expected
    ]  # every process, its numbers as sampled
    unbudgeted = [p.command for gpu in for_reader(hostile, reader).gpus for p in gpu.processes]
    for process, whole in zip(shown, unbudgeted, strict=True):
        assert process.command[:2] == ("python", "train.py"), process.command[:3]
        assert _is_start(process.command, whole)
    commands = sum(wire_bytes(p.command) for p in shown)
    assert commands <= command_budget(FASTEST_INTERVAL_S)
    if arg == PATH_ARG:  # paths are kept by the redactor: every one was cut
        assert all(p.command[-1].endswith("…") for p in shown)


def _is_start(cut: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    """``cut`` is ``whole``, or its start: whole arguments, then one's start and ``…``."""
    if cut == whole:
        return True
    return (
        cut[-1].endswith("…")
        and cut[:-1] == whole[: len(cut) - 1]
        and whole[len(cut) - 1].startswith(cut[-1][:-1])
    )


def test_at_the_default_interval_the_same_commands_are_sent_as_before(
    fake_backend: Callable[..., NvmlBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """150 commands of 4 KB fit the budget of a 1 s interval: cut only to the 4,096."""
    hostile = _hostile(fake_backend("demo").sample(), 150, PATH_ARG)
    monkeypatch.setattr(agent, "own_user_name", lambda: "alice")

    lines = _agent_lines(hostile, 1.0, 2)

    sent = protocol.snapshot_from_json(protocol.decode(lines[1]).body["snapshot"])
    before = for_reader(hostile, "alice")
    assert [p.command for gpu in sent.gpus for p in gpu.processes] == [
        p.command for gpu in before.gpus for p in gpu.processes
    ]
    assert _dropped_as_a_flood(lines, 1.0, monkeypatch) is None


def test_short_commands_stay_whole_where_long_ones_are_cut(
    fake_backend: Callable[..., NvmlBackend],
) -> None:
    hostile = _hostile(fake_backend("demo").sample(), 300, PATH_ARG)
    short = ("python", "eval.py", "--fast")
    card = hostile.gpus[0]
    quiet = replace(card.processes[0], pid=7, command=short)
    hostile = replace(
        hostile, gpus=(replace(card, processes=(quiet, *card.processes)), *hostile.gpus[1:])
    )

    shown = for_reader(hostile, "alice", command_budget(FASTEST_INTERVAL_S))

    commands = [p.command for gpu in shown.gpus for p in gpu.processes]
    assert commands[0] == short
    sizes = {wire_bytes(command) for command in commands[1:]}
    assert max(sizes) - min(sizes) <= 12  # the long ones share alike (an emoji's slack)
    assert sum(map(wire_bytes, commands)) <= command_budget(FASTEST_INTERVAL_S)


def test_the_budget_derives_from_the_lab_flood_bound() -> None:
    from gputop.cli.agent_command import MIN_INTERVAL_S

    assert MIN_INTERVAL_S == FASTEST_INTERVAL_S
    fastest = command_budget(FASTEST_INTERVAL_S)
    windows = host_link.FLOOD_WINDOW_S / FASTEST_INTERVAL_S + 1
    assert fastest * windows * agent.COMMANDS_SHARE <= host_link.FLOOD_BYTES
    assert command_budget(1.0) > fastest
    assert command_budget(0.0) == fastest  # never more snapshots than the fastest gives
    assert command_budget(float("nan")) == fastest


def test_thousands_of_processes_each_keep_a_start() -> None:
    listed: list[list[tuple[str, ...]]] = [[("python", EMOJI_ARG, "x" * 4000)] * 512] * 8
    budget = command_budget(FASTEST_INTERVAL_S)

    cut = agent.within_budget(listed, budget)

    commands = [command for commands in cut for command in commands]
    assert len(commands) == 4096
    assert all(command[0] == "python" and command[-1].endswith("…") for command in commands)
    assert sum(map(wire_bytes, commands)) <= max(budget, 4096 * MIN_COMMAND_BYTES)


def test_commands_past_a_share_are_cut_without_being_measured_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """4,096 commands of 4,000 emoji: each was measured whole three times (the share, the
    cut, each argument), 0.3 s a snapshot at an interval of 0.2 s. A command whose least
    size (a byte a character) is past the share is cut unmeasured."""
    encoded = [0]
    encode = agent.encode_basestring_ascii

    def counted(text: str) -> str:
        encoded[0] += len(text)
        return encode(text)

    monkeypatch.setattr(agent, "encode_basestring_ascii", counted)
    listed: list[list[tuple[str, ...]]] = [
        [("python", f"{n}" + EMOJI_ARG) for n in range(512)] for _ in range(8)
    ]

    cut = agent.within_budget(listed, command_budget(FASTEST_INTERVAL_S))

    assert all(command[-1].endswith("…") for commands in cut for command in commands)
    # before: 49 million characters encoded
    assert encoded[0] < 4096 * 200, encoded[0]


@pytest.mark.parametrize(
    "command",
    [("",) * 256, ("\x01",) * 256, ('"',) * 256, ("\U0001f600" * 15,) * 256],
    ids=["empty-args", "control-chars", "quotes", "emoji-args"],
)
def test_commands_of_many_short_arguments_are_counted_as_the_wire_takes_them(
    command: tuple[str, ...],
) -> None:
    """Each argument costs its quotes and a comma too: 600 commands of 256 empty ones are
    461 KB on the wire, though they hold no character."""
    listed = [[command] * 75 for _ in range(8)]
    budget = command_budget(FASTEST_INTERVAL_S)

    cut = agent.within_budget(listed, budget)

    commands = [c for commands in cut for c in commands]
    assert len(commands) == 600
    assert sum(map(wire_bytes, commands)) <= budget
    for sent in commands:
        assert sent[:-1] == command[: len(sent) - 1]
        assert len(json.dumps(list(sent), separators=(",", ":"))) == wire_bytes(sent)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(max_size=300) | st.sampled_from(["", "\x00", '"\\', "\U0001f600" * 9])),
    st.integers(MIN_COMMAND_BYTES, 3000),
)
def test_a_command_cut_to_bytes_is_within_them_and_a_start_of_it(
    command: list[str], limit: int
) -> None:
    whole = tuple(command)
    cut = cut_to_bytes(whole, limit)
    assert wire_bytes(cut) <= limit
    assert wire_bytes(cut) == len(json.dumps(list(cut), separators=(",", ":")))
    assert _is_start(cut, whole)


class _TimedOut(io.StringIO):
    """What the agent writes, each line with the (simulated) time it was written."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__()
        self.clock = clock
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        self.lines.append((self.clock[0], text))
        return len(text)


class _Intervals(threading.Event):
    """Each wait moves the simulated clock on by what it was asked; set after ``count``."""

    def __init__(self, clock: list[float], count: int) -> None:
        super().__init__()
        self.clock, self.left = clock, count

    def wait(self, timeout: float | None = None) -> bool:
        self.clock[0] += timeout or 0.0
        self.left -= 1
        if self.left <= 0:
            self.set()
        return self.is_set()


def test_a_full_size_host_at_the_fastest_interval_is_no_flood_and_is_still_sent(
    fake_backend: Callable[..., NvmlBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commands' budget left the rest of each process's record (about 600 bytes):
    2,000 GPU processes with short commands were 1.2 MB a snapshot, and at 0.2 s the lab
    dropped the host within 10 s ("sent 32 MiB ..."). The agent keeps to half the lab's
    bound: some snapshots are left out, each one sent is whole. Fails on the old code."""
    full = _hostile(fake_backend("demo").sample(), 2000, "/data/shard-0001", gpus=8)
    monkeypatch.setattr(agent, "own_user_name", lambda: "alice")
    clock = [1000.0]
    monkeypatch.setattr(agent.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(host_link.time, "monotonic", lambda: clock[0])
    out = _TimedOut(clock)
    backend: Any = _Backend(full)
    run_agent(backend, FASTEST_INTERVAL_S, out, _Intervals(clock, 150), lambda: ([], None))

    clock[0] = out.lines[0][0]  # the lab's gauge starts as the agent does
    gauge = host_link._FloodGauge()
    snapshots: list[tuple[float, str]] = []
    for written_at, line in out.lines:
        clock[0] = written_at
        assert not gauge.over(len(line.encode())), gauge.failure().reason
        if line.startswith('{"type":"snapshot"'):
            snapshots.append((written_at, line))
    size = len(snapshots[0][1])
    assert size > 1_000_000  # a snapshot this host takes: more than the lab's bound at 0.2 s
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(snapshots)]
    assert len(snapshots) < 150 and max(gaps) < 3.0  # left out, never stale (3 s)
    sent = protocol.snapshot_from_json(protocol.decode(snapshots[-1][1]).body["snapshot"])
    assert sum(len(gpu.processes) for gpu in sent.gpus) == 2000  # whole


def test_an_ordinary_host_is_sent_every_interval() -> None:
    pace = agent.SendPace(0.0)
    for tick in range(1000):  # 200 s at 0.2 s, 20 KB a snapshot
        assert pace.may_send(tick * FASTEST_INTERVAL_S)
        pace.sent(20_000)
