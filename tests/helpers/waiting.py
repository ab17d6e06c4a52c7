"""Waiting for a condition with a deadline: the one ``wait_for`` of the tests.

Tests wait for conditions, never for fixed times (docs/testing.md). ``wait_for`` polls in
this thread; ``pilot_wait_for`` lets a running Textual app work between polls; a test whose
app is not running yet but whose event loop must not block runs ``wait_for`` in a thread
(``asyncio.to_thread``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from textual.pilot import Pilot

T = TypeVar("T")

DEADLINE_S = 30.0
"""How long a condition has before the test fails: generous, for a loaded 2-core machine."""
POLL_S = 0.05


def _polls(what: str, timeout_s: float) -> Iterator[None]:
    """One step per poll until the deadline, then the failure naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        yield
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def wait_for(
    condition: Callable[[], T | None],
    what: str,
    timeout_s: float = DEADLINE_S,
    poll_s: float = POLL_S,
) -> T:
    """Poll ``condition`` until it returns something true, and return that; fail naming
    ``what`` after ``timeout_s``."""
    for _ in _polls(what, timeout_s):
        value = condition()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError("unreachable")  # pragma: no cover


async def pilot_wait_for(
    pilot: Pilot[None],
    condition: Callable[[], object],
    what: str | None = None,
    timeout_s: float = DEADLINE_S,
    poll_s: float = POLL_S,
) -> None:
    """``wait_for`` while the app runs: the app works between polls. Without ``what`` the
    failure names the condition by its docstring."""
    for _ in _polls(what or condition.__doc__ or repr(condition), timeout_s):
        if condition():
            return
        await pilot.pause(poll_s)
