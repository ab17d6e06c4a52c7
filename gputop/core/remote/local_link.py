"""The local machine in the lab view: sampled in this process, no ssh (docs/lab.md).

It offers the same ``status()`` / ``wait_for()`` / ``stop()`` as HostLink, so a host list
can mix ``local`` with servers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace

from gputop.core.errors import GputopError
from gputop.core.remote.agent import read_jobs_from_store
from gputop.core.remote.status import HostStatus, LinkState, Mode
from gputop.core.remote.transport import Failure
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.users import current_user

LOCAL_NAMES = ("local", "localhost")


class LocalLink:
    def __init__(
        self,
        host: str,
        open_backend: Callable[[], NvmlBackend],
        interval_s: float = 1.0,
    ) -> None:
        self.host = host
        self.interval_s = interval_s
        self._open_backend = open_backend
        self._read_jobs = read_jobs_from_store()
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._status = HostStatus(host, LinkState.CONNECTING, mode=Mode.LOCAL)
        self._thread = threading.Thread(target=self._run, name="host-local", daemon=True)

    def start(self) -> LocalLink:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def status(self) -> HostStatus:
        with self._changed:
            return self._status

    def wait_for(self, condition: Callable[[HostStatus], bool], timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: condition(self._status), timeout_s)

    def _set(self, **changes: object) -> None:
        with self._changed:
            self._status = replace(self._status, **changes)  # type: ignore[arg-type]
            self._changed.notify_all()

    def _run(self) -> None:
        try:
            backend = self._open_backend()
        except GputopError as error:
            self._set(state=LinkState.UNREACHABLE, failure=Failure("local", str(error)))
            return
        with closing(backend):
            while not self._stopping.is_set():
                started = time.monotonic()
                snapshot = backend.sample()
                jobs, jobs_error = self._read_jobs()
                self._set(
                    state=LinkState.LIVE,
                    snapshot=snapshot,
                    jobs=jobs,
                    jobs_error=jobs_error,
                    user=current_user(),
                    snapshots_received=self._status.snapshots_received + 1,
                )
                self._stopping.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
