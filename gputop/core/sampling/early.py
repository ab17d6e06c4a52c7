"""The dashboard's first sample, read while the interface is still starting.

Importing and starting the terminal interface takes a few hundred milliseconds, and the
first sample (every GPU, and ``/proc`` for each GPU process) tens more. Reading the sample in
a thread started before the interface is imported lets both happen at once, and the first
frame the dashboard paints can already show the GPUs instead of "waiting". The sampling
thread of the dashboard takes the result (or the exception) over; it is never read twice,
and the backend is never used by two threads at a time: whoever takes the result waits for
the thread to finish first.
"""

from __future__ import annotations

import threading

from gputop.core.model import Snapshot
from gputop.core.sampling.nvml_backend import NvmlBackend


class EarlySample:
    """``backend.sample()`` run once in a daemon thread; ``take()`` returns or raises it."""

    def __init__(self, backend: NvmlBackend) -> None:
        self._backend = backend
        self._snapshot: Snapshot | None = None
        self._error: BaseException | None = None
        self._taken = False
        self._thread = threading.Thread(target=self._run, name="gputop-first-sample", daemon=True)

    @classmethod
    def start(cls, backend: NvmlBackend) -> EarlySample:
        early = cls(backend)
        early._thread.start()
        return early

    def _run(self) -> None:
        try:
            self._snapshot = self._backend.sample()
        except BaseException as error:  # handed to whoever takes the sample
            self._error = error

    def ready(self) -> bool:
        """The sample (or its failure) is there: ``take()`` will not wait."""
        return not self._thread.is_alive()

    def wait(self, timeout_s: float = 5.0) -> None:
        """Before the backend closes: let a sample still being read finish (a bounded wait)."""
        if self._thread.ident is not None:
            self._thread.join(timeout_s)

    def take(self) -> Snapshot:
        """The sample, waiting for it if need be; raises what sampling raised. Only once."""
        if self._taken:
            raise RuntimeError("the first sample was already taken")
        self._taken = True
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        assert self._snapshot is not None
        return self._snapshot
