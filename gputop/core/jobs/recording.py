"""What a supervisor records of its job, also when the disk is full (docs/faults.md).

Where the store refuses a transition, or earlier ones wait, it goes into the reserved file
(unrecorded.py), recorded whole once the store takes it. An end gets a few quick tries,
never a long wait: the next gputop that can write records the file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from gputop.core import settings
from gputop.core.jobs.current import record_unrecorded
from gputop.core.jobs.store import JobStore, StoreError
from gputop.core.jobs.store_rows import Transition
from gputop.core.jobs.unrecorded import EndReservation, RecordedEnd, Unrecorded

END_TRIES = 3
END_RETRY_S = 0.5
"""A job's end the store refused is tried again this often, this far apart."""
RECORD_RETRY_S = 1.0
"""Where no file could be reserved, an end is tried this often for ``RECORD_GIVE_UP``."""


class Recorder:
    def __init__(
        self, store: JobStore, job_id: int, environ: Mapping[str, str], say: Callable[[str], None]
    ) -> None:
        self.store = store
        self.job_id = job_id
        self.environ = environ
        self._say = say
        self.unrecorded = Unrecorded(job_id)
        """What the store refused, as the reserved file holds it."""
        self._file = EndReservation(store.state_dir, job_id)  # before any write
        self._in_file = False
        self._fault_said = False

    def record(self, transition: Transition) -> None:
        """Write to the store now, or (it refuses, or earlier writes wait) into the file."""
        if self.unrecorded.empty:
            try:
                self.store.record(self.job_id, transition)
                return
            except StoreError as error:
                if error.fault is None:
                    raise
                self._fault(error)
        self.unrecorded = self.unrecorded.holding(transition)
        self._keep()
        self.flush()

    def _keep(self) -> None:
        """``unrecorded`` into the reserved file (reserved now, where it could not be earlier)."""
        if not self._file.reserved:
            self._file = EndReservation(self.store.state_dir, self.job_id)
        self._in_file = self._file.keep_all(self.unrecorded)

    def flush(self) -> bool:
        """Record what the file holds, then clear it; True when nothing is left to record."""
        if self.unrecorded.empty:
            return True
        try:
            record_unrecorded(self.store, self.unrecorded)
        except StoreError as error:
            if error.fault is None:
                raise
            self._fault(error)
            return False
        self.unrecorded = Unrecorded(self.job_id)
        self._file.clear()
        self._in_file = False
        if self._fault_said:
            self._fault_said = False
            self._say(f"job {self.job_id} is recorded in the job store again")
        return True

    def _fault(self, error: StoreError) -> None:
        if not self._fault_said:
            self._fault_said = True
            self._say(f"cannot record job {self.job_id} in the job store now: {error}")
            self._say(f"job {self.job_id}: what the job store refuses is kept in {self._file.path}")

    def end(self, end: RecordedEnd, stopped: bool | None = None) -> None:
        """Record the job's end in the store or the file, and let the file go."""
        self.record(end.transition(stopped))
        for _ in range(END_TRIES):
            if self.unrecorded.empty:
                break
            time.sleep(END_RETRY_S)
            self.flush()
        if not self.unrecorded.empty and not self._in_file:  # the end is in memory only
            deadline = time.monotonic() + settings.RECORD_GIVE_UP.or_default(self.environ)
            while time.monotonic() < deadline:
                time.sleep(RECORD_RETRY_S)
                if self.flush():
                    break
                self._keep()
                if self._in_file:
                    break
        if self.unrecorded.empty:
            self._file.release()
            return
        self._file.close()  # the next gputop that can write records it
        if self._in_file:
            self._say(
                f"job {self.job_id}'s end is kept in {self._file.path}; the next "
                "gputop that can write the job store records it"
            )
