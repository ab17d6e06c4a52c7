"""History on dgx-h100 (8 GPUs, about 200 simulated processes): the recorder's CPU, the
store's size at default retention, and ``gputop report`` over it (docs/history.md).

Records ``HOURS`` hours of 5-second samples on a stepped clock (as fast as it goes), then
extrapolates to a 30-day store (48 h at full resolution, 28 days rolled up): CPU per sample
over a 5-second interval; the bytes of each table an hour at full resolution and rolled up
(GPU samples by the minute, process spans merged by the day), measured with SQLite's dbstat;
the report's time per span of each kind. A benchmark, not a test: its name keeps pytest from
collecting it.
"""

from __future__ import annotations

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
from history_helpers import SteppedClock
from stand_ins import live_scenario

from gputop.core.fake import resolve_scenario_path
from gputop.core.history.recent import stored_utilization
from gputop.core.history.recorder import Recorder, RecorderOptions
from gputop.core.history.report import ReportBy, ReportQuery, build_report
from gputop.core.history.retention import Retention, apply_retention
from gputop.core.history.store import open_for_recording
from gputop.core.history.writer import HistoryWriter
from gputop.core.sampling.source import open_backend

HOURS = 4
LIVE_WARM_S = 10.0
LIVE_MEASURE_S = 60.0
INTERVAL_S = 5.0
RAW_HOURS_30D = 48
ROLLED_HOURS_30D = 30 * 24 - 48
MERGED_DAYS_30D = 28
GPU_TABLES = ("samples", "samples_by_time", "samples_t", "gpu_samples")
SPAN_TABLES = ("process_spans", "process_spans_by_end", "process_spans_to_merge")


def table_bytes(connection: sqlite3.Connection, names: tuple[str, ...]) -> int:
    """Bytes of these tables and indexes (SQLite's dbstat), after a VACUUM."""
    marks = ", ".join("?" * len(names))
    found = connection.execute(
        f"SELECT SUM(pgsize) FROM dbstat WHERE name IN ({marks})", names
    ).fetchone()[0]
    return int(found or 0)


def spans(connection: sqlite3.Connection) -> int:
    return int(connection.execute("SELECT COUNT(*) FROM process_spans").fetchone()[0])


def report_s(connection: sqlite3.Connection) -> float:
    started = time.perf_counter()
    build_report(connection, ReportQuery(0.0, 4e9, ReportBy.USER))
    return time.perf_counter() - started


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


def main() -> None:
    samples = int(HOURS * 3600 / INTERVAL_S)
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
        sparkline_ms = statistics.median(costs) * 1000
        connection.execute("VACUUM")
        raw_gpu_h = table_bytes(connection, GPU_TABLES) / HOURS
        raw_span_h = table_bytes(connection, SPAN_TABLES) / HOURS
        raw_spans = spans(connection)
        raw_report_s_span = report_s(connection) / raw_spans

        apply_retention(connection, last + 3600, Retention(full_s=0.0))
        connection.execute("VACUUM")
        rolled_gpu_h = table_bytes(connection, GPU_TABLES) / HOURS
        merged_spans_day = spans(connection)  # the hours recorded are all on one day
        merged_span_bytes = table_bytes(connection, SPAN_TABLES) / merged_spans_day
        merged_report_s_span = report_s(connection) / merged_spans_day
        fixed = table_bytes(
            connection,
            ("processes", "strings", "sqlite_autoindex_processes_1", "sqlite_autoindex_strings_1"),
        )
        connection.close()
        backend.close()

    raw_spans_30d = RAW_HOURS_30D * raw_spans / HOURS
    merged_spans_30d = MERGED_DAYS_30D * merged_spans_day
    store_mb = (
        RAW_HOURS_30D * (raw_gpu_h + raw_span_h)
        + ROLLED_HOURS_30D * rolled_gpu_h
        + merged_spans_30d * merged_span_bytes
        + fixed
    ) / 1e6
    report_30d = raw_spans_30d * raw_report_s_span + merged_spans_30d * merged_report_s_span
    print(f"dgx-h100, {processes} processes, {samples} samples of {INTERVAL_S:g} s")
    print(
        f"recorder CPU: {cpu_per_sample * 1000:.1f} ms a sample = "
        f"{cpu_per_sample / INTERVAL_S * 100:.2f} % of a core at a {INTERVAL_S:g}-s interval "
        "(target <= 0.5 %; simulated processes, sampling included)"
    )
    print(
        f"store: an hour of GPU samples {raw_gpu_h / 1e3:.0f} kB ({rolled_gpu_h / 1e3:.0f} kB "
        f"by the minute), of process spans {raw_span_h / 1e3:.0f} kB ({merged_span_bytes:.0f} "
        f"bytes a process and day merged); 30 days at default retention: {store_mb:.0f} MB "
        "(target <= 50 MB)"
    )
    print(f"dashboard start with a store: {sparkline_ms:.1f} ms to read the sparklines (median)")
    count, live_percent = live_recorder_cpu()
    print(
        f"recorder CPU with {count} live processes: {live_percent:.2f} % of a core at a "
        f"{INTERVAL_S:g}-s interval, over {LIVE_MEASURE_S:g} s (target <= 0.5 %)"
    )
    spans_30d = raw_spans_30d + merged_spans_30d
    print(f"report --since 30d: {report_30d:.2f} s over {spans_30d / 1e3:.0f} k process spans")


if __name__ == "__main__":
    os.environ.setdefault("TZ", "UTC")
    main()
