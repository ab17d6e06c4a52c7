"""The history store's ``-wal`` kept within a bound while readers hold it back.

In WAL mode a reader's open transaction pins the frames after its snapshot: checkpoints
cannot pass it and the ``-wal`` cannot start over, so it grows for as long as the reader
holds on. A shared store (``record --readable-by``) is read by other users, any of whom can
hold a transaction open; before this the ``-wal`` grew from 3.6 to 21.6 MB in 40 s and stayed.

So, after each batch, the recorder checkpoints what readers allow (``PASSIVE``), and says
once when a reader holds frames back; the ``-wal`` is truncated (``TRUNCATE``, never
waiting on a reader) once it passed ``TRUNCATE_AT`` and nobody holds it; and before a batch,
a ``-wal`` at ``max_bytes`` stops the recorder appending: samples stay in memory (the oldest
dropped beyond the writer's bound) until the reader lets go, which is said too.
docs/history.md, "A shared store", gives the figures.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path

from gputop.core import settings
from gputop.core.history.store import BUSY_TIMEOUT_S, TRUNCATE_AT

_BUSY_TIMEOUT_MS = int(BUSY_TIMEOUT_S * 1000)


def max_wal_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The most the ``-wal`` may reach before the recorder stops appending, in bytes
    (``settings.HISTORY_MAX_WAL``); a bad value is a UsageError naming it."""
    return settings.HISTORY_MAX_WAL.read(environ) * 1024 * 1024


class WalBound:
    def __init__(self, path: Path, say: Callable[[str], None]):
        self._path = path
        self._wal = Path(f"{path}-wal")
        self._say = say
        self.max_bytes = max_wal_bytes()
        self._held_back = False
        self.capped = False
        """True while the recorder does not append (the ``-wal`` at its bound)."""

    def size(self) -> int:
        try:
            return os.stat(self._wal, follow_symlinks=False).st_size
        except OSError:
            return 0

    def room(self, connection: sqlite3.Connection) -> bool:
        """Whether a batch may be appended now (said once when not, once when again)."""
        if self.size() >= self.max_bytes:
            self._truncate(connection)
        if self.size() < self.max_bytes:
            if self.capped:
                self.capped = False
                self._say(
                    f"The history store's -wal is under its bound again ({_mb(self.size())}): "
                    "writing the samples kept meanwhile."
                )
            return True
        if not self.capped:
            self.capped = True
            self._say(
                f"Not writing to the history store {self._path} for now: its -wal reached "
                f"{_mb(self.size())}, its bound of {_mb(self.max_bytes)} "
                f"({settings.HISTORY_MAX_WAL.name}), "
                "because a reader holds it (a read transaction or a lock left open) and no "
                "checkpoint can pass it. gputop keeps sampling and keeps the samples in "
                "memory until the reader lets go (docs/history.md, 'A shared store')."
            )
        return False

    def after_write(self, connection: sqlite3.Connection) -> None:
        """Checkpoint what readers allow; truncate a large ``-wal`` nobody holds."""
        try:
            _busy, log, done = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error:
            return
        if log > 0 and done < log:
            if not self._held_back:
                self._held_back = True
                self._say(
                    f"A reader of the history store {self._path} holds a read transaction "
                    f"open: the -wal ({_mb(self.size())}) cannot be checkpointed past it. "
                    f"gputop lets it grow to {_mb(self.max_bytes)}, then keeps samples in "
                    "memory until the reader lets go."
                )
            return
        if self._held_back:
            self._held_back = False
            self._say(f"The history store {self._path} is checkpointed again.")
        if self.size() > TRUNCATE_AT:
            self._truncate(connection)

    def _truncate(self, connection: sqlite3.Connection) -> None:
        """A ``TRUNCATE`` checkpoint that never waits on a reader (busy: nothing done)."""
        try:
            connection.execute("PRAGMA busy_timeout = 0")
            try:
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                connection.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        except sqlite3.Error:
            return


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"
