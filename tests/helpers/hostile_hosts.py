"""A host that sends absurd values: agent lines built from a real simulated snapshot, with
NaN, huge and negative numbers, wrong types, absurd timestamps and hostile strings put in.

See docs/security.md ("A host's values") for what gputop guarantees about them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from gputop.core.remote.host_feed import HostFeed
from gputop.core.remote.status import HostStatus, LinkState
from gputop.core.sampling.source import open_backend
from gputop.core.snapshot_json import snapshot_to_json
from helpers.hostile import HOSTILE

NESTED_LINE = '{"type":"snapshot","snapshot":' + "[" * 100_000 + "]" * 100_000 + "}\n"
"""A line nested deeper than any decoder recurses (Python's: about 1,000)."""
NOW = 1_767_225_630.0
"""Our wall clock in these tests: 2026-01-01 00:00:30 UTC."""


def good_document(scenario: str = "v100x4") -> dict[str, Any]:
    """A real simulated snapshot document, stamped ``NOW`` and sent as a real host's
    (a simulated host's clock is its scenario's and is not judged)."""
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "30"})
    try:
        document = snapshot_to_json(backend.sample())
    finally:
        backend.close()
    document["timestamp"] = NOW
    document["simulated"] = None
    return document


def raw_line(message_type: str, **fields: Any) -> str:
    """A protocol line as a broken or hostile agent writes it: NaN and Infinity allowed."""
    return json.dumps({"type": message_type, **fields}) + "\n"


def agent_lines(document: Any, user: Any = "alice", jobs: Any = ()) -> list[str]:
    return [
        raw_line("hello", protocol=1, mode="full", gputop="0", user=user, interval_s=1),
        raw_line("snapshot", snapshot=document),
        raw_line("jobs", jobs=list(jobs) if isinstance(jobs, tuple) else jobs, error=None),
    ]


def replay(host: str, lines: Sequence[str], now: float = NOW) -> HostStatus:
    """The status a link shows after reading these lines (HostLink applies the same outcomes)."""
    feed = HostFeed(host, wall_clock=lambda: now)
    status = HostStatus(host, LinkState.CONNECTING)
    for line in lines:
        outcome = feed.feed(line)
        if outcome.end is not None:
            return replace(status, state=LinkState.UNREACHABLE, failure=outcome.end)
        status = replace(status, **outcome.changes)
        if outcome.snapshot_arrived:
            status = replace(
                status, state=LinkState.LIVE, snapshots_received=status.snapshots_received + 1
            )
    return status


def hostile_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**30), max_value=10**30),
        st.sampled_from([10**20, -400, -1, 0, 2**63, 2**31, 10**400, -(10**400)]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -1e308]),
        st.text(max_size=12),
        st.just(HOSTILE),
    )
    return st.one_of(
        scalars,
        st.lists(scalars, max_size=3),
        st.dictionaries(st.text(max_size=4), scalars, max_size=2),
    )


def _paths(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every place in a snapshot document a value can be put."""
    paths: list[tuple[Any, ...]] = [(key,) for key in document]
    for g, gpu in enumerate(document["gpus"]):
        paths += [("gpus", g, key) for key in gpu]
        paths += [("gpus", g, "clocks_mhz", key) for key in gpu["clocks_mhz"]]
        for p, process in enumerate(gpu["processes"] or []):
            paths += [("gpus", g, "processes", p, key) for key in process]
            paths += [("gpus", g, "processes", p, "command", 0)]
    return paths


GOOD = good_document()
PATHS = _paths(GOOD)


@st.composite
def hostile_documents(draw: st.DrawFn) -> Any:
    """The good document with a few values anywhere replaced by hostile ones."""
    document = copy.deepcopy(GOOD)
    for path in draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=6)):
        place: Any = document
        try:
            for key in path[:-1]:
                place = place[key]
            place[path[-1]] = draw(hostile_values())
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change replaced a container on this path
    return document


@st.composite
def hostile_streams(draw: st.DrawFn) -> list[str]:
    """A whole stream: hello, snapshots, jobs and junk lines, each possibly hostile."""
    user = draw(st.one_of(st.just("alice"), hostile_values()))
    jobs = draw(st.one_of(st.just([]), st.lists(hostile_jobs(), max_size=3), hostile_values()))
    lines = agent_lines(draw(hostile_documents()), user, jobs)
    junk = st.one_of(
        st.text(max_size=40),
        st.just(HOSTILE),
        st.sampled_from([NESTED_LINE, '{"type":"jobs","jobs":' + "[" * 5000 + "\n"]),
        hostile_values().map(lambda value: raw_line("snapshot", snapshot=value)),
        hostile_values().map(lambda value: raw_line("jobs", jobs=value, error=value)),
    )
    for _ in range(draw(st.integers(0, 3))):
        lines.insert(draw(st.integers(0, len(lines))), draw(junk))
    return lines


@st.composite
def hostile_jobs(draw: st.DrawFn) -> Any:
    record: dict[str, Any] = {
        "id": 1,
        "name": "train",
        "gpus": [0],
        "status": "running",
        "status_text": "running",
        "created_at": NOW - 60,
        "started_at": NOW - 50,
        "ended_at": None,
    }
    for key in draw(st.lists(st.sampled_from(sorted(record)), max_size=3)):
        record[key] = draw(hostile_values())
    return record
