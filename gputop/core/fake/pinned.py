"""Live processes pinned to simulated cards: a launched job appears on the cards it runs on.

On a real machine a job pinned with ``CUDA_VISIBLE_DEVICES`` appears in the driver's
process list of each card it opened. In simulation nothing opens a card, so the fake takes
the pinning as the sign instead: where the scenario has a ``job_profile``
(docs/scenario.md), every live process of this machine whose environment pins it to
simulated cards by UUID is listed as a compute process on each of them, with the profile's
memory and SM readings at the process's age. Of a tree of such processes (a shell and the
program it runs) only the topmost is listed: one simulated context per job and card.

As the driver reads ``CUDA_VISIBLE_DEVICES``, the list stops at its first entry that names
no simulated card. Only environments this user may read are seen (``/proc/PID/environ``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection

import psutil

from gputop.core.numbers import is_ascii_digits
from gputop.core.records import frozen

SCAN_EVERY_S = 0.5
"""One scan of ``/proc`` serves every NVML call within this time (a sample asks each card)."""
CVD = b"CUDA_VISIBLE_DEVICES="


@frozen
class PinnedProcess:
    pid: int
    age_s: float
    """Seconds since it started (real time)."""
    uuids: tuple[str, ...]
    """The simulated cards it is pinned to, in its ``CUDA_VISIBLE_DEVICES`` order."""


class PinnedScanner:
    """Finds the processes pinned to a set of simulated UUIDs, at most every SCAN_EVERY_S."""

    def __init__(self, uuids: Collection[str]) -> None:
        self._uuids = frozenset(uuids)
        self._scanned_at = -SCAN_EVERY_S
        self._found: tuple[PinnedProcess, ...] = ()

    def processes(self) -> tuple[PinnedProcess, ...]:
        now = time.monotonic()
        if now - self._scanned_at >= SCAN_EVERY_S:
            self._found = self._scan()
            self._scanned_at = now
        return self._found

    def _scan(self) -> tuple[PinnedProcess, ...]:
        pinned: dict[int, tuple[str, ...]] = {}
        try:
            names = os.listdir("/proc")
        except OSError:
            return ()
        for name in names:
            if not is_ascii_digits(name):
                continue
            uuids = self._pinning(name)
            if uuids:
                pinned[int(name)] = uuids
        found = []
        now = time.time()
        for pid, uuids in sorted(pinned.items()):
            try:
                process = psutil.Process(pid)
                if process.status() == psutil.STATUS_ZOMBIE or process.ppid() in pinned:
                    continue
                age = max(0.0, now - process.create_time())
            except psutil.Error:
                continue
            found.append(PinnedProcess(pid, age, uuids))
        return tuple(found)

    def _pinning(self, pid: str) -> tuple[str, ...]:
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                environ = file.read(1 << 20)
        except OSError:
            return ()
        for entry in environ.split(b"\0"):
            if entry.startswith(CVD):
                return self._cards(entry[len(CVD) :].decode("ascii", errors="replace"))
        return ()

    def _cards(self, value: str) -> tuple[str, ...]:
        cards: list[str] = []
        for token in value.split(","):
            token = token.strip()
            if token not in self._uuids:
                break
            if token not in cards:
                cards.append(token)
        return tuple(cards)
