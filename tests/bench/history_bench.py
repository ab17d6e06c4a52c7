"""History on dgx-h100 (8 GPUs, about 200 simulated processes): the recorder's CPU, the
store's size at default retention, and ``gputop report`` over it (docs/history.md).

Records ``HOURS`` hours of 5-second samples on a stepped clock (as fast as it goes), then
extrapolates: CPU per sample over a 5-second interval; bytes an hour at full resolution and
rolled up, to a 30-day store (48 h full, 28 days rolled up); the report's time an hour,
likewise. A benchmark, not a test: its name keeps pytest from
collecting it.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from history_helpers import SteppedClock

from gputop.core.history.recorder import Recorder, RecorderOptions
from gputop.core.history.report import ReportBy, ReportQuery, build_report
from gputop.core.history.retention import Retention, apply_retention
from gputop.core.history.store import open_for_recording
from gputop.core.history.writer import HistoryWriter, WriteFailures
from gputop.core.sampling.source import open_backend

HOURS = 4
INTERVAL_S = 5.0
RAW_HOURS_30D = 48
MERGED_HOURS_30D = 30 * 24 - 48


def size(connection: sqlite3.Connection) -> int:
    page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    used = connection.execute("PRAGMA page_count").fetchone()[0]
    free = connection.execute("PRAGMA freelist_count").fetchone()[0]
    return int((used - free) * page_size)


def spans(connection: sqlite3.Connection) -> int:
    return int(connection.execute("SELECT COUNT(*) FROM process_spans").fetchone()[0])


def report_s(connection: sqlite3.Connection) -> float:
    started = time.perf_counter()
    build_report(connection, ReportQuery(0.0, 4e9, ReportBy.USER))
    return time.perf_counter() - started


def main() -> None:
    samples = int(HOURS * 3600 / INTERVAL_S)
    with tempfile.TemporaryDirectory() as directory:
        store = Path(directory) / "state" / "history.sqlite3"
        backend = open_backend("dgx-h100", environ={"GPUTOP_FAKE_TIME": "0"})
        connection = open_for_recording(store, [])
        clock = SteppedClock(backend, INTERVAL_S)
        options = RecorderOptions(interval_s=INTERVAL_S, speed=1e9, max_samples=samples)
        writer = HistoryWriter(connection, WriteFailures(store, print))
        started = time.process_time()
        Recorder(clock.sample, writer, connection, options, print).run(threading.Event())
        cpu_per_sample = (time.process_time() - started) / samples
        processes = connection.execute("SELECT COUNT(*) FROM processes").fetchone()[0]
        connection.execute("VACUUM")
        raw_bytes_h = size(connection) / HOURS
        raw_spans_h = spans(connection) / HOURS
        raw_report_s_h = report_s(connection) / HOURS

        last = connection.execute("SELECT MAX(t) FROM samples").fetchone()[0]
        apply_retention(connection, last + 3600, Retention(full_s=0.0))
        connection.execute("VACUUM")
        merged_bytes_h = size(connection) / HOURS
        merged_spans_h = spans(connection) / HOURS
        merged_report_s_h = report_s(connection) / HOURS
        connection.close()
        backend.close()

    store_mb = (RAW_HOURS_30D * raw_bytes_h + MERGED_HOURS_30D * merged_bytes_h) / 1e6
    report_30d = RAW_HOURS_30D * raw_report_s_h + MERGED_HOURS_30D * merged_report_s_h
    spans_30d = RAW_HOURS_30D * raw_spans_h + MERGED_HOURS_30D * merged_spans_h
    print(f"dgx-h100, {processes} processes, {samples} samples of {INTERVAL_S:g} s")
    print(
        f"recorder CPU: {cpu_per_sample * 1000:.1f} ms a sample = "
        f"{cpu_per_sample / INTERVAL_S * 100:.2f} % of a core at a {INTERVAL_S:g}-s interval "
        "(target <= 0.5 %; simulated processes, sampling included)"
    )
    print(
        f"store: {raw_bytes_h / 1e6:.2f} MB an hour at full resolution, "
        f"{merged_bytes_h / 1e6:.2f} MB rolled up; 30 days at default retention: "
        f"{store_mb:.0f} MB (target <= 50 MB)"
    )
    print(
        f"report --since 30d: {report_30d:.2f} s over {spans_30d / 1e3:.0f} k process spans, "
        f"extrapolated from {HOURS} h (target <= 1 s)"
    )


if __name__ == "__main__":
    os.environ.setdefault("TZ", "UTC")
    main()
