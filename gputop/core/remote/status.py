"""What the lab view knows about one host at one moment: its state, data and wire cost."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from gputop.core.install_advice import install_advice
from gputop.core.model import Snapshot
from gputop.core.remote.agent_version import older_note
from gputop.core.remote.transport import Failure


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


@dataclass(frozen=True)
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
        return text
