"""On a Slurm node: measure what a job submitted by ``gputop run --slurm`` uses of its cards
(docs/slurm.md, "What a Slurm job used").

The batch script (submit.py) runs ``BOOTSTRAP``, which imports only this module, calls
``start_meter`` and then ``exec``'s the user's command: the command is the batch step's
process itself, so Slurm's signals, its exit status, its environment and its standard
streams are exactly the script's. Whatever fails in the bootstrap or the meter, the command
still runs. ``start_meter`` forks the meter twice over, so it is nobody's child the command
could reap; the meter measures the job's cards with the local jobs' usage meter
(core/jobs/usage_meter.py) and rewrites the job's report after each sample (usage_file.py),
since the node may kill it the moment the command ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import socket
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

BOOTSTRAP = """\
import os, signal, sys
env = {name: value for name, value in os.environb.items() if name}
command = sys.argv[3:]
try:
    import importlib.util
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    spec = importlib.util.spec_from_file_location("gputop", sys.argv[1] + "/__init__.py")
    package = importlib.util.module_from_spec(spec)
    sys.modules["gputop"] = package
    spec.loader.exec_module(package)
    from gputop.core.slurm.usage_wrapper import start_meter, started_environment
    env = started_environment()
    start_meter(sys.argv[2], os.getpid())
except BaseException:
    pass
for name in ("SIGPIPE", "SIGXFSZ"):
    signal.signal(getattr(signal, name), signal.SIG_DFL)
try:
    os.execvpe(command[0], command, env)
except OSError as error:
    sys.stderr.write(f"{command[0]}: {error.strerror}\\n")
    os._exit(127 if isinstance(error, FileNotFoundError) else 126)
"""
"""Stdlib only up to ``start_meter``: run with ``python -E -c BOOTSTRAP PACKAGE_DIR LOGS_DIR
COMMAND...``. The ``gputop`` package is loaded from PACKAGE_DIR, the submitting gputop's,
without putting its parent (a whole site-packages) ahead of the standard library; the job's
working directory is not searched. Python ignores SIGPIPE and SIGXFSZ; both go back to the
default before the ``exec``, as ``subprocess`` does for its children."""


WHOLE_ENVIRON_BYTES = 1 << 30
"""More than ``execve`` passes (arguments and environment share a quarter of the stack)."""


def started_environment() -> Mapping[bytes, bytes]:
    """The environment this process started with, for the command's ``exec``; the current
    one if it cannot be read.

    A name given twice is its first entry's, as ``getenv`` gives it; an entry with no name
    (``=x``, which no one can read by name) is left out: ``os.execve`` refuses it with
    ValueError, and the command would not run."""
    from gputop.core.sampling.process_env import read_environ

    data = read_environ("/proc/self", WHOLE_ENVIRON_BYTES)
    if data is None:
        entries = list(os.environb.items())
    else:
        entries = [item.partition(b"=")[::2] for item in data.split(b"\0") if b"=" in item]
    environment: dict[bytes, bytes] = {}
    for name, value in entries:
        if name:
            environment.setdefault(name, value)
    return environment


def start_meter(logs_dir: str, command_pid: int) -> None:
    """Start the meter for the command that will be ``command_pid``; return at once."""
    if not os.environ.get("SLURM_JOB_ID", "").isdigit():
        return
    middle = os.fork()
    if middle == 0:
        try:
            pidfd = -1
            with contextlib.suppress(OSError, AttributeError):
                # Opened while the command's process waits for this one: it is that process.
                pidfd = os.pidfd_open(command_pid)
            if os.fork() == 0:
                _meter_process(Path(logs_dir), command_pid, pidfd)
        finally:
            os._exit(0)
    os.waitpid(middle, 0)


class _Stop(BaseException):
    """Slurm (or a person) asked the meter to end: report once more, then end."""


def _stop(signum: int, frame: object) -> None:
    raise _Stop


def _meter_process(logs_dir: Path, command_pid: int, pidfd: int) -> None:
    """The meter: never returns, never raises, never writes to the job's streams."""
    try:
        if 0 <= pidfd <= 2:  # the job started with a standard stream closed
            pidfd = fcntl.fcntl(pidfd, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        if pidfd > 2:
            os.closerange(3, pidfd)
            os.closerange(pidfd + 1, 1024)
        else:
            os.closerange(3, 1024)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, _stop)
        _measure(logs_dir, _CommandWatch(command_pid, pidfd if pidfd > 2 else None), os.environ)
    except BaseException:
        pass
    os._exit(0)


def _measure(logs_dir: Path, watch: _CommandWatch, environ: Mapping[str, str]) -> None:
    from gputop.core import settings
    from gputop.core.errors import GputopError
    from gputop.core.jobs.usage_meter import UsageMeter
    from gputop.core.sampling.nvml_backend import SamplingOptions
    from gputop.core.sampling.source import open_backend
    from gputop.core.slurm.usage_file import write_report

    job_id = int(environ["SLURM_JOB_ID"])
    node = environ.get("SLURMD_NODENAME") or socket.gethostname()

    def report_not_measured(reason: str) -> None:
        with contextlib.suppress(Exception):
            write_report(logs_dir, job_id, node, not_measured=f"not measured on {node}: {reason}")

    given = slurm_given(environ)
    if not given:
        report_not_measured("Slurm gave the job no GPUs there (no SLURM_JOB_GPUS)")
        return
    try:
        backend = open_backend(
            environ=environ,
            options=SamplingOptions(driver_probe=False, cuda_views=False, claims=False),
        )
    except GputopError as error:
        report_not_measured(f"NVML cannot be read there: {error}")
        return
    except Exception as error:  # a broken driver binding: the command runs on regardless
        report_not_measured(f"NVML cannot be read there: {type(error).__name__}: {error}")
        return
    with contextlib.closing(backend):
        gpus = {gpu.physical_index: gpu for gpu in backend.sample().gpus}
        cards = job_cards(given, sorted(gpus))
        if not cards:
            shown = ",".join(str(index) for index in given)
            report_not_measured(
                f"NVML there sees none of the cards Slurm gave the job (SLURM_JOB_GPUS={shown})"
            )
            return
        meter = UsageMeter(
            [nvml for nvml, _ in cards],
            [gpus[nvml].uuid or "" for nvml, _ in cards],
            backend,
            settings.USAGE_POLL.or_default(environ),
            owns=lambda pid: watch.owns(pid, job_id),
        )
        to_node = dict(cards)
        running = True
        while running:
            try:
                running = not watch.ended(meter.poll_s)
                meter.sample()
                usage = meter.usage() if running else meter.finish()
            except _Stop:
                running, usage = False, meter.usage()
            node_usage = replace(
                usage,
                per_card=tuple(
                    replace(card, physical_index=to_node[card.physical_index])
                    for card in usage.per_card
                ),
            )
            with contextlib.suppress(Exception):  # a full or unshared disk: measure on
                write_report(logs_dir, job_id, node, usage=node_usage)


def slurm_given(environ: Mapping[str, str]) -> tuple[int, ...]:
    """The node's indices of the cards Slurm gave the job (the whole job's, not a step's)."""
    from gputop.core.slurm.allocation import slurm_gpus

    found = slurm_gpus(environ, ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS"))
    return () if found is None else found[1]


def job_cards(given: tuple[int, ...], nvml_indices: list[int]) -> list[tuple[int, int]]:
    """(NVML index here, the node's index) of each card Slurm gave the job.

    Slurm names them in the node's numbering (``SLURM_JOB_GPUS``); where NVML here sees
    exactly that many cards and they are not 0..k-1, a device cgroup renumbered them from 0
    (docs/slurm.md, "Inside an allocation"): the k-th of Slurm's, in order, is NVML's k."""
    ordered = sorted(set(given))
    if len(nvml_indices) == len(ordered) and ordered != list(range(len(ordered))):
        return list(zip(sorted(nvml_indices), ordered, strict=True))
    return [(index, index) for index in ordered if index in nvml_indices]


class _CommandWatch:
    """The command's process: when it ends, and whether a pid is it or below it."""

    def __init__(self, pid: int, pidfd: int | None) -> None:
        self.pid = pid
        self._pidfd = pidfd
        try:
            self._session: int | None = pid if os.getsid(pid) == pid else None
        except OSError:
            self._session = None

    def ended(self, wait_s: float) -> bool:
        """Wait up to ``wait_s`` for the command to end; whether it has."""
        if self._pidfd is not None:
            readable, _, _ = select.select([self._pidfd], [], [], wait_s)
            return bool(readable)
        import time

        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not self._alive():
                return True
            time.sleep(min(0.5, wait_s))
        return not self._alive()

    def _alive(self) -> bool:
        """Still running: not gone and not a zombie (its parent, Slurm's step, reaps it; this
        meter cannot). Read from /proc, never by a signal: every signal gputop sends goes
        out from process_control.py."""
        import psutil

        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
        except psutil.Error:
            return True

    def owns(self, pid: int, slurm_job_id: int) -> bool:
        """The command, a process below it or in its session, or one of the job's ``srun``
        steps (Slurm starts those, not the command): in the job's cgroup, or, without
        cgroups, with the job's ``SLURM_JOB_ID``, and then only a process of this meter's
        user, the job's, since anyone may set either (cgroup.py)."""
        if pid == self.pid:
            return True
        import psutil

        from gputop.core.slurm.cgroup import slurm_job_of_pid

        try:
            if self._session is not None and os.getsid(pid) == self._session:
                return True
            if any(parent.pid == self.pid for parent in psutil.Process(pid).parents()):
                return True
        except (OSError, psutil.Error):
            pass
        return slurm_job_of_pid(pid, {slurm_job_id: os.getuid()}) == slurm_job_id
