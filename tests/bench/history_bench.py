"""History on dgx-h100 (8 GPUs, about 200 simulated processes): the recorder's CPU, a real
30-day store at default retention, and ``gputop report --since 30d`` over it
(docs/history.md).

- **Recorder CPU**: ``gputop record`` as its own process beside a live stand-in for each GPU
  process, at the default 5-s interval; and, on a stepped clock, the CPU a sample costs
  (sampling the simulated GPUs included).
- **A 30-day store**: the recorder's own writer and retention fill a store with 30 days that
  end now: the last 48 hours as 5-second samples, the 28 days before them as 1-minute samples
  (what retention keeps of them anyway; ``minute_sample``), rolled up every 10 minutes of
  store time as the recorder does. The samples are the scenario's own, replayed, and every 6
  hours a new set of 200 processes replaces the last (new pids and start times), so that the
  store holds 24,000 processes' spans rather than 200. Its size is the files' as the
  recorder leaves them, and after a VACUUM.
- **``gputop report --since 30d``** over it: the real command, a new process each run, timed
  from start to exit; median (min-max) of ``REPORT_RUNS``.

A benchmark, not a test: its name keeps pytest from collecting it.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil
from helpers.history import SteppedClock
from stand_ins import live_scenario

from gputop.core.fake import resolve_scenario_path
from gputop.core.history.recent import stored_utilization
from gputop.core.history.recorder import RETENTION_EVERY_S, Recorder, RecorderOptions
from gputop.core.history.retention import Retention, apply_retention
from gputop.core.history.store import open_for_recording
from gputop.core.history.writer import HistoryWriter
from gputop.core.model import Snapshot
from gputop.core.sampling.source import open_backend

HOURS = 1
LIVE_WARM_S = 10.0
LIVE_MEASURE_S = 60.0
INTERVAL_S = 5.0
DAYS = 30
RAW_HOURS = 48
ROLLED_STEP_S = 60.0
GENERATION_S = 6 * 3600.0
PID_STRIDE = 1_000_000
"""Generation n's pids: the scenario's plus n million (still below 2**31)."""
BATCH = 12
REPORT_RUNS = 5


def spans(connection: sqlite3.Connection) -> int:
    return int(connection.execute("SELECT COUNT(*) FROM process_spans").fetchone()[0])


def live_recorder_cpu() -> tuple[int, float]:
    """``gputop record`` as its own process on dgx-h100 with a live stand-in for each GPU
    process (stand_ins.py), at the default 5-s interval: its CPU over ``LIVE_MEASURE_S``
    after ``LIVE_WARM_S`` of start-up, in % of a core."""
    with (
        tempfile.TemporaryDirectory() as directory,
        live_scenario(resolve_scenario_path("dgx-h100")) as (scenario, count),
    ):
        recorder = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gputop",
                "record",
                "--fake",
                str(scenario),
                "--db",
                str(Path(directory) / "state" / "history.sqlite3"),
            ],
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(LIVE_WARM_S)
            process = psutil.Process(recorder.pid)
            before = sum(process.cpu_times()[:2])
            time.sleep(LIVE_MEASURE_S)
            used = sum(process.cpu_times()[:2]) - before
        finally:
            recorder.terminate()
            recorder.wait()
    return count, used / LIVE_MEASURE_S * 100


def recorder_cpu_per_sample(samples: int) -> tuple[int, float, float]:
    """Processes, CPU seconds a sample on a stepped clock, and the dashboard's start-up read
    of the sparklines from that store (ms, median)."""
    with tempfile.TemporaryDirectory() as directory:
        store = Path(directory) / "state" / "history.sqlite3"
        backend = open_backend("dgx-h100", environ={"GPUTOP_FAKE_TIME": "0"})
        connection = open_for_recording(store, [])
        clock = SteppedClock(backend, INTERVAL_S)
        options = RecorderOptions(interval_s=INTERVAL_S, speed=1e9, max_samples=samples)
        writer = HistoryWriter(connection, store, print)
        started = time.process_time()
        Recorder(clock.sample, writer, options, print).run(threading.Event())
        cpu_per_sample = (time.process_time() - started) / samples
        processes = connection.execute("SELECT COUNT(*) FROM processes").fetchone()[0]
        last = connection.execute("SELECT MAX(t) FROM samples").fetchone()[0]
        costs = []
        for _ in range(20):  # what the dashboard adds to its start with a store present
            begun = time.perf_counter()
            stored_utilization(store, last, 240)
            costs.append(time.perf_counter() - begun)
        connection.close()
        backend.close()
    return processes, cpu_per_sample, statistics.median(costs) * 1000


def replayed_samples() -> list[Snapshot]:
    """A minute of the scenario's own samples, 5 s apart, to replay."""
    backend = open_backend("dgx-h100", environ={"GPUTOP_FAKE_TIME": "0"})
    try:
        found = []
        for step in range(12):
            backend.nvml.set_time(step * INTERVAL_S)
            found.append(backend.sample())
        return found
    finally:
        backend.close()


def minute_sample(base: list[Snapshot]) -> Snapshot:
    """A minute of ``base`` as one sample: each process at its highest SM % of the minute.

    The 28 days before the last 48 hours are written a sample a minute. Replaying the 5-s
    samples one a minute would turn a 5-s dip in a process's SM % into a minute of idleness;
    what retention keeps of a real minute is an idle stretch only where every sample of it
    was idle (spans.py keeps no idle run under a minute), which this sample says."""
    first = base[0]
    gpus = []
    for index, gpu in enumerate(first.gpus):
        processes = []
        for position, process in enumerate(gpu.processes):
            same = [
                sample.gpus[index].processes[position]
                for sample in base
                if len(sample.gpus[index].processes) > position
                and sample.gpus[index].processes[position].pid == process.pid
            ]
            known = [p.sm_util_percent for p in same if p.sm_util_percent is not None]
            busiest = max(known) if known else None
            processes.append(dataclasses.replace(process, sm_util_percent=busiest))
        gpus.append(dataclasses.replace(gpu, processes=tuple(processes)))
    return dataclasses.replace(first, gpus=tuple(gpus))


def generation(snapshot: Snapshot, number: int, born: float) -> Snapshot:
    """``snapshot`` with its processes replaced by generation ``number``'s: other pids, born
    at ``born`` (a process is its pid and start time)."""
    gpus = tuple(
        dataclasses.replace(
            gpu,
            processes=tuple(
                dataclasses.replace(p, pid=p.pid + number * PID_STRIDE, start_time=born)
                for p in gpu.processes
            ),
        )
        for gpu in snapshot.gpus
    )
    return dataclasses.replace(snapshot, gpus=gpus)


def fill_30_days(store: Path, end: float) -> tuple[int, float]:
    """Samples written and seconds taken (see the module's docstring)."""
    base = replayed_samples()
    minute = minute_sample(base)
    connection = open_for_recording(store, [])
    writer = HistoryWriter(connection, store, print)
    start = end - DAYS * 86400
    full_from = end - RAW_HOURS * 3600
    generations: dict[int, list[Snapshot]] = {}
    written = 0
    last_retention = start
    began = time.perf_counter()
    t = start
    while t < end:
        step = INTERVAL_S if t >= full_from else ROLLED_STEP_S
        number = int((t - start) // GENERATION_S)
        if number not in generations:
            born = start + number * GENERATION_S
            generations = {number: [generation(s, number, born) for s in [minute, *base]]}
        samples = generations[number]
        sample = samples[1 + written % len(base)] if t >= full_from else samples[0]
        writer.add(dataclasses.replace(sample, timestamp=t), step)
        written += 1
        if written % BATCH == 0:
            writer.flush()
        if t - last_retention >= RETENTION_EVERY_S:
            writer.flush()
            apply_retention(connection, t, Retention())
            last_retention = t
        t += step
    writer.flush()
    apply_retention(connection, end, Retention())
    connection.close()
    return written, time.perf_counter() - began


def files_mb(store: Path) -> float:
    return (
        sum(
            os.path.getsize(f"{store}{suffix}")
            for suffix in ("", "-wal", "-shm")
            if os.path.exists(f"{store}{suffix}")
        )
        / 1e6
    )


def report_runs(store: Path) -> list[float]:
    """``gputop report --since 30d --db STORE``, a new process each run: seconds to exit."""
    times = []
    for _ in range(REPORT_RUNS):
        begun = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "gputop", "report", "--since", "30d", "--db", str(store)],
            capture_output=True,
            text=True,
            check=False,
        )
        times.append(time.perf_counter() - begun)
        if done.returncode != 0:
            raise SystemExit(f"gputop report failed: {done.stderr.strip()}")
    return times


def spread(values: list[float], digits: int = 2) -> str:
    low, middle, high = min(values), statistics.median(values), max(values)
    return f"{middle:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def main() -> None:
    samples = int(HOURS * 3600 / INTERVAL_S)
    processes, cpu_per_sample, sparkline_ms = recorder_cpu_per_sample(samples)
    print(f"dgx-h100, {processes} processes, {samples} samples of {INTERVAL_S:g} s")
    print(
        f"recorder CPU: {cpu_per_sample * 1000:.1f} ms a sample = "
        f"{cpu_per_sample / INTERVAL_S * 100:.2f} % of a core at a {INTERVAL_S:g}-s interval "
        "(simulated processes, sampling included)"
    )
    print(f"dashboard start with a store: {sparkline_ms:.1f} ms to read the sparklines (median)")
    count, live_percent = live_recorder_cpu()
    print(
        f"recorder CPU with {count} live processes: {live_percent:.2f} % of a core at a "
        f"{INTERVAL_S:g}-s interval, over {LIVE_MEASURE_S:g} s (target <= 0.5 %)"
    )
    with tempfile.TemporaryDirectory() as directory:
        store = Path(directory) / "state" / "history.sqlite3"
        written, took = fill_30_days(store, time.time())
        connection = sqlite3.connect(store)
        known = connection.execute("SELECT COUNT(*) FROM processes").fetchone()[0]
        spans_kept = spans(connection)
        connection.close()
        as_left = files_mb(store)
        times = report_runs(store)
        connection = sqlite3.connect(store)
        connection.execute("VACUUM")
        connection.close()
        vacuumed = files_mb(store)
    print(
        f"30-day store: {written} samples written in {took:.0f} s; {known} processes, "
        f"{spans_kept} spans kept; {as_left:.1f} MB as the recorder leaves it, "
        f"{vacuumed:.1f} MB after VACUUM (target <= 50 MB)"
    )
    print(
        f"report --since 30d over it: {spread(times)} s from start to exit, "
        f"{REPORT_RUNS} runs (target <= 1 s)"
    )


if __name__ == "__main__":
    os.environ.setdefault("TZ", "UTC")
    main()
