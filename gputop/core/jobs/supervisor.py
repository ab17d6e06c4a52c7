"""The supervisor: one small process per job that waits for its cards, runs it, records it.

Started detached by launch.py (stderr to the job's log), it outlives whatever launched it
and starts the job as the leader of a new session. SIGTERM to it is a stop request: SIGTERM
to the job's whole process group, SIGKILL after its grace. ``--tty``: on a pty (tmux mode).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gputop.core import settings
from gputop.core.claims.directory import claims_path
from gputop.core.claims.jobs import IGNORED_ENV, JobClaim, job_cards
from gputop.core.errors import GputopError
from gputop.core.jobs.child import Child, PopenChild, PtyChild, Wakeup, wait_for_enter
from gputop.core.jobs.logs import CHECK_S, LogCap, gputop_line, limits_from
from gputop.core.jobs.model import JOB_ID_ENV, JOB_TOKEN_ENV, Job, JobState
from gputop.core.jobs.notify import ENDED, STARTED, JobEvent, run_notify_command
from gputop.core.jobs.store import JobStore, StoreError
from gputop.core.jobs.store_rows import (
    ProcessSeen,
    Transition,
    note_set,
    started,
    stop_asked,
    supervisor_seen,
)
from gputop.core.jobs.unrecorded import EndReservation, RecordedEnd, Unrecorded
from gputop.core.jobs.usage_meter import UsageRecorder
from gputop.core.jobs.waiting import CardWaiter
from gputop.core.jobs.xid_marks import live_job_xids
from gputop.core.numbers import parse_size
from gputop.core.private_files import append_to_log, read_env_file
from gputop.core.process_control import end_group
from gputop.core.safe_text import clean, clean_lines
from gputop.core.units import duration

RUNNING_POLL_S = 5.0
PANE_VARIABLES = ("TERM", "TMUX_PANE", "COLUMNS", "LINES")
LEADER_REAP_S = 5.0
SUPERVISOR_FAILED_EXIT = 70
END_TRIES = 3
END_RETRY_S = 0.5
"""A job's end the store refused is tried again this often, this far apart."""
RECORD_RETRY_S = 1.0
"""Where no file could be reserved, an end is tried this often for ``RECORD_GIVE_UP``."""


class Recorder:
    """What a supervisor records of its job, also when the disk is full (docs/faults.md).

    Where the store refuses a transition, or earlier ones wait, it goes into the reserved
    file (unrecorded.py), recorded whole once the store takes it. An end gets a few quick
    tries, never a long wait: the next gputop that can write records the file.
    """

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
            refused = self.store.try_record(self.job_id, transition)
            if refused is None:
                return
            self._fault(refused)
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
        refused = self.store.try_record(self.job_id, *self.unrecorded.transitions())
        if refused is not None:
            self._fault(refused)
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


def job_environment(base: Mapping[str, str], job: Job) -> dict[str, str]:
    """The caller's environment, the pinning variables, and the job's id and token."""
    env = {**base, **job.env, JOB_ID_ENV: str(job.id)}
    if job.token:
        env[JOB_TOKEN_ENV] = job.token
    return env


class Supervisor:
    def __init__(
        self,
        store: JobStore,
        job_id: int,
        environ: Mapping[str, str],
        wake: Wakeup,
        tty: bool,
        log_max: int | None = None,
        notify: Sequence[str] = (),
    ) -> None:
        self.notify = tuple(notify)
        """``--notify-command``'s argv (notify.py)."""
        self.store = store
        self.job_id = job_id
        self.environ = environ
        self.wake = wake
        self.tty = tty
        self.log_path = ""
        self._child: Child | None = None
        self._stopped = False
        self._last: Job | None = None
        """The job as last recorded: recorded again if the store is replaced."""
        self._recorder: Recorder  # made by ``run``, before any write
        self._log_limits = limits_from(environ, log_max)
        self._claim: JobClaim | None = None
        self._measuring: UsageRecorder | None = None

    def run(self) -> int:
        job = self.store.get(self.job_id)
        self.log_path = job.log_path
        self._recorder = Recorder(self.store, job.id, self.environ, self._say)
        self._recorder.record(supervisor_seen(ProcessSeen.now(os.getpid())))  # the launcher did too
        job = self._last = self.store.get(self.job_id)
        if job.state is not JobState.WAITING:
            return 0  # already ended (stopped before this supervisor got going) or taken
        try:
            if job.wait_for_free:
                waited = self._wait_for_cards(job)
                if waited is None:
                    return 0
                job = waited
            if self._stop_asked():
                self._ended_before_start()
                return 0
            return self._run(job)
        except Exception as error:  # record it: a job must never stay "running" for ever
            return self._failed(error)

    def _failed(self, error: Exception) -> int:
        """Something broke in here (the store, most likely): say so, and never abandon a
        running job: wait for it, then record its end as well as still possible."""
        self._say(f"gputop's supervisor failed: {type(error).__name__}: {error}")
        append_to_log(self.log_path, clean_lines(traceback.format_exc()).encode())
        returncode = None
        if self._child is not None:
            while (returncode := self._child.poll()) is None:
                self._child.wait_for_event(RUNNING_POLL_S)
            self._child.finish()
        self._release_claim()
        note = f"gputop's supervisor failed: {error}"
        code, signum = _split(SUPERVISOR_FAILED_EXIT if returncode is None else returncode)
        self._recorder.end(RecordedEnd(self.job_id, time.time(), code, signum, note=note))
        return SUPERVISOR_FAILED_EXIT

    # --- waiting -------------------------------------------------------------------------

    def _wait_for_cards(self, job: Job) -> Job | None:
        """The job, claimed and ready to run once its cards are free; None if stopped."""
        waiter = CardWaiter(self.store, self.environ)
        last_reason = None
        try:
            while not self._stop_asked():
                self._recorder.flush()
                try:
                    ready, reason = waiter.try_start(job)
                    if ready is not None:
                        return ready
                    if reason != last_reason:
                        self.store.record(job.id, note_set(f"waiting: {reason}"))
                except StoreError as error:  # damaged: the next gputop to open it repairs it
                    reason = f"cannot use the job store: {error}"
                if reason != last_reason:
                    self._say(f"job {job.id} is waiting: {reason}")
                    last_reason = reason
                self.wake.wait(waiter.poll_s)
        finally:
            waiter.close()
        self._ended_before_start()
        return None

    def _stop_asked(self) -> bool:
        if self.wake.stop_signal is not None:
            return True
        self._ensure_recorded()
        try:
            job = self.store.get(self.job_id)
        except StoreError:
            return False  # damaged for now (see _wait_for_cards); keep waiting
        return job.stop_requested or job.state is JobState.ENDED

    def _ended_before_start(self) -> None:
        self._recorder.record(stop_asked())
        why = "stopped while waiting; it never started"
        self._recorder.end(RecordedEnd(self.job_id, time.time(), note=why))
        self._say(f"job {self.job_id} was stopped while waiting; it never started")

    # --- running -------------------------------------------------------------------------

    def _run(self, job: Job) -> int:
        if not os.path.isdir(job.cwd):
            return self._could_not_start(job, 1, f"the working directory {job.cwd} is gone")
        env = job_environment(self.environ, job)
        refused = self._take_claim(job)
        if refused is not None:
            return self._could_not_start(job, 1, refused)
        self._say(f"job {job.id} ({job.name}) starting: {_describe(job)}")
        spawned_at = time.time()
        kind = PtyChild if self.tty else PopenChild  # on a terminal (tmux mode), or detached
        try:
            child: Child = kind(job.command, job.cwd, env, job.log_path, self.wake)
        except StoreError as error:  # its log is refused (a planted link, another's file)
            return self._could_not_start(job, 126, f"its log cannot be used: {error}")
        except FileNotFoundError:
            return self._could_not_start(job, 127, f"{job.command[0]}: command not found")
        except PermissionError:
            return self._could_not_start(job, 126, f"{job.command[0]}: permission denied")
        except OSError as error:
            return self._could_not_start(
                job, 126, f"{job.command[0]}: cannot run it: {error.strerror or error}"
            )
        self._child = child
        self._recorder.record(started(ProcessSeen.now(child.pid), spawned_at))
        self._last = self.store.get(job.id)
        if job.wait_for_free:
            self._notify(STARTED, background=True)  # as recorded: started
        self._measuring = UsageRecorder(self.store, self._last, self.environ, self._say)
        returncode = self._supervise(child)
        child.finish()
        self._child = None
        self._release_claim()
        usage = self._measuring.finish()
        self._ensure_recorded()  # its end must land in the store it is recorded in
        as_seen = self._last or job
        code, signum = _split(returncode)
        end = RecordedEnd(self.job_id, time.time(), code, signum, self._stopped, usage=usage)
        # said before the end is recorded: whoever waits on the store finds the log complete
        told = end.transition().applied(self._stored_or(as_seen))
        self._say(f"job {job.id} {told.status_text} after {duration(told.duration_s() or 0.0)}")
        self._recorder.end(end, self._stopped)  # a few quick tries, never a long wait
        ended = self._stored_or(as_seen)
        if ended.is_active:  # not recorded, and no file could hold it
            ended = end.transition().applied(ended)
        self._notify(ENDED, ended)
        if self.tty and not ended.stop_requested:
            wait_for_enter(self.wake)
        return 0

    def _stored_or(self, job: Job) -> Job:
        """The job as the store has it now (a stop asked meanwhile shows), else ``job``."""
        try:
            return self.store.get(self.job_id)
        except StoreError:
            return job

    def _take_claim(self, job: Job) -> str | None:
        """Claim the job's cards while it runs (docs/claims.md); why it must not start."""
        from gputop.core.sampling.source import open_backend

        self._claim = JobClaim(job.id, self.environ)
        if not os.path.isdir(claims_path(self.environ)):
            return None  # claims are not set up here
        if job.env.get(IGNORED_ENV):
            self._say(f"job {job.id} ignores other users' claims: {job.env[IGNORED_ENV]}")
            return None
        try:  # for the MIG instances of its GPUs, and theirs of its instances
            backend = open_backend(environ=self.environ)
            try:
                snapshot = backend.sample()
            finally:
                backend.close()
        except GputopError:
            snapshot = None  # its cards by the UUIDs recorded at launch, alone
        cards = job_cards(snapshot, job.physical_indices, job.uuids)
        refused = self._claim.take(cards, job.name)
        return None if refused is None else f"its cards were claimed meanwhile: {refused}"

    def _supervise(self, child: Child) -> int:
        """Wait for the job's end; a stop request on the way ends its whole group. Its log
        is kept under its cap meanwhile (logs.py, LogCap)."""
        cap = LogCap(self.log_path, *self._log_limits)
        checked = 0.0
        try:
            while (returncode := child.poll()) is None:
                if self.wake.stop_signal is not None:
                    return self._stop(child)
                if (
                    time.monotonic() - checked >= RUNNING_POLL_S
                    or not self._recorder.unrecorded.empty
                ):
                    self._ensure_recorded()
                    self._recorder.flush()
                    checked = time.monotonic()
                if self._measuring is not None:
                    self._measuring.tick()
                if self._claim is not None and (said := self._claim.renew()):
                    self._say(f"job {self.job_id}: {said}")
                said = cap.check()
                if said is not None:
                    self._say(f"job {self.job_id}'s {said}")
                    self._recorder.record(note_set(said))
                due = self._measuring.wait_s if self._measuring is not None else None
                child.wait_for_event(CHECK_S if due is None else min(CHECK_S, due))
            cap.check()
        finally:
            cap.close()
        return returncode

    def _ensure_recorded(self) -> None:
        """A damaged store was moved aside and a new one started while this job lived:
        record the job again there, so that no running job disappears from `gputop jobs`,
        `jobs stop` and `pick`."""
        if self._last is None:
            return
        try:
            if self.store.has_job(self.job_id):
                return
            adopted = self.store.adopt(self._last)
        except StoreError as error:
            self._say(f"cannot record job {self.job_id} in the job store: {error}")
            return
        if adopted:
            self._say(
                f"the job store was replaced (a damaged one was moved aside); job "
                f"{self.job_id} is recorded again in the new one"
            )
        else:
            self._say(f"the job store was replaced and job id {self.job_id} is taken there")

    def _stop(self, child: Child) -> int:
        self._stopped = True
        self._recorder.record(stop_asked())
        grace = self.store.get(self.job_id).grace_s
        self._say(
            f"stopping job {self.job_id}: SIGTERM to its process group, SIGKILL after {grace:g} s"
        )
        # No reaping until the group is ended: the unreaped leader keeps its pid, which is
        # the group's id, from being reused, so killpg can only reach the job's own group
        # (docs/security.md, part two). A zombie leader counts as ended.
        used = end_group(child.pid, grace, wait=child.wait_for_event)
        if used == signal.SIGKILL:
            self._say(f"job {self.job_id} was still running after {grace:g} s: SIGKILL sent")
        deadline = time.monotonic() + LEADER_REAP_S
        while (returncode := child.poll()) is None and time.monotonic() < deadline:
            child.wait_for_event(0.1)
        return -signal.SIGKILL if returncode is None else returncode

    def _release_claim(self) -> None:
        if self._claim is not None:
            with contextlib.suppress(GputopError, OSError):
                self._claim.release()

    def _could_not_start(self, job: Job, code: int, why: str) -> int:
        self._release_claim()
        self._say(f"job {job.id} could not start: {why}")
        self._recorder.end(RecordedEnd(self.job_id, time.time(), code, note=why))
        self._notify(ENDED)
        if self.tty:
            wait_for_enter(self.wake)
        return 0

    def _notify(self, kind: str, job: Job | None = None, background: bool = False) -> None:
        """Run the notify command for ``job`` (default: as recorded now); a problem goes to
        the log."""
        if not self.notify:
            return
        if job is None:
            try:
                job = self.store.get(self.job_id)
            except StoreError as error:
                self._say(f"job {self.job_id}: no word sent, the job store failed: {error}")
                return
        cards = self._measuring.gpus if kind == ENDED and self._measuring is not None else ()
        event = JobEvent(kind, job, xids=live_job_xids(job, cards, time.time()))

        def run() -> None:
            problem = run_notify_command(self.notify, event, self.environ)
            if problem:
                self._say(f"job {self.job_id}: {problem}")

        if background:  # the job runs meanwhile: a slow command must not hold up stopping it
            threading.Thread(target=run, name="notify", daemon=True).start()
        else:
            run()

    def _say(self, text: str) -> None:  # nothing is written when the disk is full
        """One gputop line in the log (and in the tmux pane, in tty mode)."""
        append_to_log(self.log_path, gputop_line(text))
        if self.tty:
            with contextlib.suppress(OSError):
                os.write(1, gputop_line(text).replace(b"\n", b"\r\n"))


def _split(returncode: int) -> tuple[int | None, int | None]:
    """(exit code, signal) from a return code, negative for the signal that ended it."""
    return (None, -returncode) if returncode < 0 else (returncode, None)


def _describe(job: Job) -> str:
    mapping = ", ".join(
        f"cuda:{logical} = GPU {physical}" for logical, physical in enumerate(job.physical_indices)
    )
    pins = " ".join(f"{key}={value}" for key, value in job.env.items())
    shell = " (under a shell)" if job.uses_shell else ""
    return f"{job.command_text}{shell} in {job.cwd}; {mapping}; {pins}"


def _base_environment(env_file: str | None) -> dict[str, str]:
    """The launcher's environment: ours, or (tmux mode) the one it left in a private file
    (read only if it is a regular file of ours, never through a link; then deleted)."""
    if env_file is None:
        return dict(os.environ)
    base = read_env_file(env_file)
    if base is None:
        base = dict(os.environ)
        base.pop("PYTHONSAFEPATH", None)
    for name in PANE_VARIABLES:  # the pane's terminal, not the launcher's
        if name in os.environ:
            base[name] = os.environ[name]
        else:
            base.pop(name, None)
    return base


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gputop.core.jobs.supervisor")
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--job", required=True, type=int)
    parser.add_argument("--tty", action="store_true", help="run the job on a pseudo-terminal")
    parser.add_argument("--env-file", help="the launcher's environment (tmux mode)")
    parser.add_argument(
        "--notify-arg",
        action="append",
        default=[],
        help="one word of the notify command's argv, in order (gputop run --notify-command)",
    )
    parser.add_argument("--log-max", type=lambda text: parse_size(text, "--log-max"))
    args = parser.parse_args(argv)
    wake = Wakeup()
    wake.install()
    environ = _base_environment(args.env_file)
    try:
        store = JobStore.open(args.state_dir, repair=True)
    except GputopError as error:
        print(f"gputop supervisor: {clean(str(error))}", file=sys.stderr)
        return 1
    try:
        return Supervisor(
            store, args.job, environ, wake, args.tty, args.log_max, args.notify_arg
        ).run()
    except GputopError as error:
        with contextlib.suppress(OSError):  # stderr is the job's log: the disk may be full
            print(f"gputop supervisor: job {args.job}: {clean(str(error))}", file=sys.stderr)
        return 1
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
