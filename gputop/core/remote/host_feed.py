"""One host's output, line by line, turned into checked values for its status.

The agent's JSON lines (protocol.py) or nvidia-smi's CSV frames (reduced.py) are decoded
here and checked for meaning where they enter (host_values.py). A line that cannot be read
marks this host's status and nothing else: no exception leaves ``feed`` for what a host
sends. ``HostLink`` feeds it the lines of its ssh; tests feed it lines directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import field
from typing import Any

from gputop.core.model import Snapshot
from gputop.core.numbers import DECODE_ERRORS
from gputop.core.records import frozen
from gputop.core.remote.agent_version import checked_version
from gputop.core.remote.host_values import check_jobs, check_snapshot
from gputop.core.remote.protocol import (
    MAX_TEXT_CHARS,
    ProtocolError,
    decode,
    host_text,
    snapshot_from_json,
)
from gputop.core.remote.reduced import MARK_NOTHING, MARK_REDUCED, ReducedFrames
from gputop.core.remote.status import Mode
from gputop.core.remote.transport import Failure, no_gputop
from gputop.core.safe_text import clean

MAX_REASON_CHARS = 120


@frozen(slots=False)
class Outcome:
    """What one line changes: fields of ``HostStatus`` to set, whether a snapshot came
    (the host is live), and the failure that ends the stream, if it says so."""

    changes: dict[str, Any] = field(default_factory=dict)
    snapshot_arrived: bool = False
    end: Failure | None = None
    history: dict[str, Any] | None = None
    """An answer to the lab's history request, for ``HostLink``'s waiting caller."""


NOTHING = Outcome()


class HostFeed:
    def __init__(self, host: str, wall_clock: Callable[[], float] = time.time) -> None:
        self.host = host
        self._wall_clock = wall_clock
        self._reduced: ReducedFrames | None = None
        self._unreadable = 0
        self._jobs_impossible = 0
        self._snapshot_impossible = 0

    def feed(self, line: str) -> Outcome:
        if self._reduced is not None:
            snapshot = self._reduced.feed(line)
            if snapshot is None:
                return NOTHING
            return self._arrived(snapshot, self._reduced.impossible_in_frame)
        text = line.strip()
        if text == MARK_REDUCED:
            self._reduced = ReducedFrames(self.host, self._wall_clock)
            return Outcome({"mode": Mode.REDUCED})
        if text == MARK_NOTHING:
            return Outcome(end=no_gputop(self.host))
        try:
            message = decode(text)
        except ProtocolError as error:
            if text.startswith(("{", "[")):  # meant as JSON (nested too deeply, cut...)
                return self._unreadable_line(str(error))
            return NOTHING  # a line from a login banner, or not JSON at all: skip it
        try:
            return self._message(message.type, message.body)
        except DECODE_ERRORS as error:  # ProtocolError names the field; the rest, the kind
            return self._unreadable_line(str(error) or type(error).__name__)

    def too_long(self) -> Outcome:
        """A line longer than any real snapshot (``HostLink`` drops it unread)."""
        return self._unreadable_line("a line too long to read")

    def _message(self, kind: str, body: dict[str, Any]) -> Outcome:
        if kind == "hello":
            user = body.get("user")
            return Outcome(
                {
                    "mode": Mode.FULL,
                    "user": host_text(user),
                    "agent_version": checked_version(body.get("gputop")),
                }
            )
        if kind == "snapshot":
            return self._arrived(snapshot_from_json(body.get("snapshot")), 0)
        if kind == "jobs":
            return self._jobs(body)
        if kind == "history":
            return Outcome(history=body)
        if kind == "error":
            message = body.get("message")
            text = host_text(message)
            why = clean(repr(message)[:MAX_TEXT_CHARS] if text is None else text)
            return Outcome(end=Failure("remote-error", f"gputop agent failed: {why}"))
        return NOTHING  # a type from a newer agent

    def _arrived(self, snapshot: Snapshot, impossible_before: int) -> Outcome:
        checked = check_snapshot(snapshot, self._wall_clock())
        self._snapshot_impossible = impossible_before + len(checked.impossible)
        changes = {
            "snapshot": checked.snapshot,
            "clock_skew_s": checked.clock_skew_s,
            "impossible_values": self._snapshot_impossible + self._jobs_impossible,
        }
        return Outcome(changes, snapshot_arrived=True)

    def _jobs(self, body: dict[str, Any]) -> Outcome:
        records = body.get("jobs")
        error = body.get("error")
        jobs = None
        self._jobs_impossible = 0
        if isinstance(records, list):
            jobs, self._jobs_impossible = check_jobs(records)
        elif records is not None:
            self._jobs_impossible = 1
        return Outcome(
            {
                "jobs": jobs,
                "jobs_error": host_text(error),
                "impossible_values": self._snapshot_impossible + self._jobs_impossible,
            }
        )

    def _unreadable_line(self, reason: str) -> Outcome:
        self._unreadable += 1
        reason = clean(reason)
        if len(reason) > MAX_REASON_CHARS:
            reason = reason[: MAX_REASON_CHARS - 1] + "…"
        return Outcome({"unreadable_lines": self._unreadable, "unreadable_reason": reason})
