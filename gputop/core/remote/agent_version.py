"""Which gputop a host's agent runs (its hello says), and what an older one lacks.

The hello line carries the agent's version (protocol.py). A host whose gputop is older than
this one is still shown; its status says so, what it lacks by the table below, and the
command that updates it (``gputop hosts install HOST``). See docs/lab.md.
"""

from __future__ import annotations

import re

from gputop import __version__
from gputop.core.install_advice import install_command

MAX_VERSION_CHARS = 64
# MAJOR.MINOR.PATCH and an optional suffix (a pre-release or local part), nothing else:
# the text comes from another machine.
_VERSION = re.compile(r"^(\d{1,6})\.(\d{1,6})\.(\d{1,6})([0-9A-Za-z.+-]{0,40})$")

Version = tuple[int, int, int]

FEATURES: tuple[tuple[Version, str], ...] = (
    # (the release that brought it, what the lab uses it for): CHANGELOG has the details.
    ((0, 1, 0), "the lab's jobs, launching and signals (gputop jobs, run --json, signal)"),
)


def checked_version(value: object) -> str | None:
    """The hello's ``gputop`` field if it is a version, else None (a broken or odd agent)."""
    if not isinstance(value, str) or len(value) > MAX_VERSION_CHARS:
        return None
    return value if _VERSION.match(value) else None


def parse_version(text: str) -> Version | None:
    found = _VERSION.match(text)
    if found is None:
        return None
    return int(found[1]), int(found[2]), int(found[3])


def lacks(agent: str, ours: str = __version__) -> list[str] | None:
    """What the lab uses that an agent of version ``agent`` lacks; None where it is not
    older than ``ours`` (or either version cannot be read)."""
    theirs, mine = parse_version(agent), parse_version(ours)
    if theirs is None or mine is None or theirs >= mine:
        return None
    return [what for since, what in FEATURES if theirs < since <= mine]


def older_note(host: str, agent: str | None, ours: str = __version__) -> str | None:
    """``gputop 0.0.9 there, older than this 0.1.0 (it lacks ...); update it: ...``, or None."""
    if agent is None:
        return None
    missing = lacks(agent, ours)
    if missing is None:
        return None
    lacking = f" (it lacks {'; '.join(missing)})" if missing else ""
    return (
        f"gputop {agent} there, older than this {ours}{lacking}; update it: {install_command(host)}"
    )
