"""What the lab view knows about one host at one moment: its state, data and wire cost."""

from __future__ import annotations

import enum
from typing import Any

from gputop.core.install_advice import install_advice
from gputop.core.model import Snapshot
from gputop.core.records import frozen
from gputop.core.remote.agent_version import older_note
from gputop.core.remote.transport import Failure
from gputop.core.units import counted


class LinkState(str, enum.Enum):
    CONNECTING = "connecting"
    LIVE = "live"
    STALE = "stale"
    """Connected, but no snapshot for several intervals (a hung server or network)."""
    UNREACHABLE = "unreachable"


class Mode(str, enum.Enum):
    FULL = "full"
    """gputop runs on the host: every field, the processes' owners, the jobs."""
    REDUCED = "reduced"
    """No gputop there: nvidia-smi's CSV fields only (gputop/core/remote/reduced.py)."""
    LOCAL = "local"
    """This machine, sampled in this process without ssh."""


@frozen(slots=False)
class HostStatus:
    host: str
    """The name as the user gave it (an ssh alias or host name): untrusted text."""
    state: LinkState
    mode: Mode | None = None
    snapshot: Snapshot | None = None
    """The latest snapshot; kept while stale or unreachable, so a person sees the last data."""
    jobs: list[dict[str, Any]] | None = None
    jobs_error: str | None = None
    user: str | None = None
    """The remote user the agent runs as (whose processes are "yours" there)."""
    failure: Failure | None = None
    stale_for_s: float | None = None
    retry_in_s: float | None = None
    bytes_received: int = 0
    """Bytes read from ssh's stdout since the link started (every connection)."""
    bytes_per_s: float | None = None
    """The steady rate on the current connection: bytes between its first and latest
    snapshot over the time between them; None until two snapshots have arrived."""
    snapshots_received: int = 0
    agent_version: str | None = None
    """The gputop version the host's agent said in its hello (checked: agent_version.py)."""
    impossible_values: int = 0
    """Values of the latest snapshot and jobs out of range, shown as N/A
    (gputop/core/remote/host_values.py)."""
    clock_skew_s: float | None = None
    """How far the host's clock is ahead of ours (negative: behind) when it is far off; its
    data is then timed by its arrival."""
    unreadable_lines: int = 0
    """Snapshot or jobs lines the protocol refused (a wrong type), since the link started."""
    unreadable_reason: str | None = None
    """Why the latest of them was refused (cleaned, short)."""

    def trouble(self) -> str:
        """What is wrong with the host's data, for its status: ``sent 3 impossible values
        (shown as N/A), clock 3 h ahead``; empty when nothing is."""
        parts = []
        if self.impossible_values:
            parts.append(
                f"sent {counted(self.impossible_values, 'impossible value')} (shown as N/A)"
            )
        if self.clock_skew_s is not None:
            parts.append(f"clock {skew_text(self.clock_skew_s)}")
        if self.unreadable_lines:
            lines = counted(self.unreadable_lines, "unreadable line")
            parts.append(f"{lines} ({self.unreadable_reason})")
        return ", ".join(parts)

    def describe(self) -> str:
        """One line for a person: ``live``, ``stale for 12 s``, ``unreachable: why; what to do``."""
        if self.state is LinkState.STALE:
            text = f"stale for {self.stale_for_s or 0:.0f} s (no data from the server)"
        elif self.state is LinkState.UNREACHABLE:
            why = self.failure.describe() if self.failure else "not reachable"
            text = f"unreachable: {why}"
            if self.retry_in_s is not None:
                text += f" (retrying in {self.retry_in_s:.0f} s)"
        else:
            text = self.state.value
        older = older_note(self.host, self.agent_version)
        if older is not None and self.state is not LinkState.UNREACHABLE:
            text += f", {older}"
        if self.mode is Mode.REDUCED and self.state is not LinkState.UNREACHABLE:
            advice = install_advice(self.host)
            text += f", reduced mode (nvidia-smi only; for every field, {advice})"
        trouble = self.trouble()
        return f"{text}, {trouble}" if trouble else text


def skew_text(skew_s: float) -> str:
    """``3 h ahead``, ``5 min behind``: a clock's offset in one rounded unit."""
    seconds = abs(skew_s)
    for unit, size in (("years", 365 * 86400), ("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            amount = f"{seconds / size:.0f} {unit}"
            break
    else:
        amount = f"{seconds:.0f} s"
    return f"{amount} {'ahead' if skew_s > 0 else 'behind'}"
