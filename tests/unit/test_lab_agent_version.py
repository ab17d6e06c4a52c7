"""A host whose agent runs an older gputop: its hello's version, what it lacks, and the
command that updates it (gputop/core/remote/agent_version.py)."""

from __future__ import annotations

import pytest

from gputop.core.remote.agent_version import checked_version, lacks, older_note
from gputop.core.remote.host_summary import short_state
from gputop.core.remote.status import HostStatus, LinkState, Mode


@pytest.mark.parametrize("value", ["0.1.0", "1.2.3", "0.2.0rc1", "0.1.0+g3c5da60", "10.0.0.dev2"])
def test_a_version_from_the_hello_is_kept(value: str) -> None:
    assert checked_version(value) == value


@pytest.mark.parametrize(
    "value", [None, 1, 0.1, "", "0.1", "v0.1.0", "0.1.0\x1b[2J", "0.1.0 evil", "1.2.3" + "a" * 70]
)
def test_anything_else_in_the_hello_is_no_version(value: object) -> None:
    assert checked_version(value) is None


def test_an_older_agent_lacks_what_came_after_it() -> None:
    assert lacks("0.0.9", ours="0.1.0") == [
        "the lab's jobs, launching and signals (gputop jobs, run --json, signal)"
    ]


def test_an_older_agent_with_nothing_missing_lacks_nothing_but_is_older() -> None:
    assert lacks("0.1.0", ours="0.1.1") == []


@pytest.mark.parametrize("agent", ["0.1.0", "0.2.0", "1.0.0"])
def test_the_same_or_a_newer_agent_is_not_older(agent: str) -> None:
    assert lacks(agent, ours="0.1.0") is None
    assert older_note("gpu1", agent, ours="0.1.0") is None


def test_the_note_says_the_versions_what_is_missing_and_the_command() -> None:
    note = older_note("gpu1", "0.0.9", ours="0.1.0")

    assert note == (
        "gputop 0.0.9 there, older than this 0.1.0 (it lacks the lab's jobs, launching and "
        "signals (gputop jobs, run --json, signal)); update it: gputop hosts install gpu1"
    )


def test_a_live_host_with_an_older_agent_says_so_in_its_status_and_summary() -> None:
    status = HostStatus("gpu1", LinkState.LIVE, Mode.FULL, agent_version="0.0.1")

    assert status.describe().startswith("live, gputop 0.0.1 there, older than this ")
    assert status.describe().endswith("update it: gputop hosts install gpu1")
    assert short_state(status) == "live, older gputop"


def test_a_host_with_a_current_agent_says_nothing_about_versions() -> None:
    from gputop import __version__

    status = HostStatus("gpu1", LinkState.LIVE, Mode.FULL, agent_version=__version__)

    assert status.describe() == "live"
    assert short_state(status) == "live"
