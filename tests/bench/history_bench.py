"""History on dgx-h100 (8 GPUs, about 200 simulated processes): the recorder's CPU, the
store's size at default retention, and ``gputop report`` over it (docs/history.md).

Records ``HOURS`` hours of 5-second samples on a stepped clock (as fast as it goes), then
extrapolates: CPU per sample over a 5-second interval; bytes per raw sample and per 1-minute
roll-up to a 30-day store (48 h raw, 28 days of minutes); the report's time per stored
process row to that store's rows. A benchmark, not a test: its name keeps pytest from
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

from history_helpers import SteppedClock  # noqa: E402

from gputop.core.history.recorder import Recorder, RecorderOptions  # noqa: E402
from gputop.core.history.report import ReportBy, ReportQuery, build_report  # noqa: E402
from gputop.core.history.retention import Retention, apply_retention  # noqa: E402
from gputop.core.history.store import open_for_recording  # noqa: E402
from gputop.core.history.writer import HistoryWriter, WriteFailures  # noqa: E402
from gputop.core.sampling.source import open_backend  # noqa: E402

HOURS = 2
INTERVAL_S = 5.0
RAW_SAMPLES_30D = 48 * 3600 / INTERVAL_S
MINUTE_SAMPLES_30D = (30 * 24 - 48) * 60


def size(connection: sqlite3.Connection) -> int:
    page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    used = connection.execute("PRAGMA page_count").fetchone()[0]
    free = connection.execute("PRAGMA freelist_count").fetchone()[0]
    return int((used - free) * page_size)


def rows(connection: sqlite3.Connection) -> int:
    return int(connection.execute("SELECT COUNT(*) FROM process_samples").fetchone()[0])


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
        processes = rows(connection) / samples
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        raw_bytes = size(connection) / samples

        query = ReportQuery(0.0, 4e9, ReportBy.USER)
        started = time.perf_counter()
        build_report(connection, query)
        report_s_per_row = (time.perf_counter() - started) / rows(connection)

        last = connection.execute("SELECT MAX(t) FROM samples").fetchone()[0]
        apply_retention(connection, last + 3600, Retention(full_s=0.0))
        minutes = connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
        connection.execute("VACUUM")
        minute_bytes = size(connection) / minutes
        connection.close()
        backend.close()

    store_mb = (RAW_SAMPLES_30D * raw_bytes + MINUTE_SAMPLES_30D * minute_bytes) / 1e6
    rows_30d = (RAW_SAMPLES_30D + MINUTE_SAMPLES_30D) * processes
    print(f"dgx-h100, {processes:.0f} processes, {samples} samples of {INTERVAL_S:g} s")
    print(
        f"recorder CPU: {cpu_per_sample * 1000:.1f} ms a sample = "
        f"{cpu_per_sample / INTERVAL_S * 100:.2f} % of a core at a {INTERVAL_S:g}-s interval "
        "(target <= 0.5 %; simulated processes, sampling included)"
    )
    print(
        f"store: {raw_bytes / 1000:.1f} kB a raw sample, {minute_bytes / 1000:.1f} kB a minute; "
        f"30 days at default retention: {store_mb:.0f} MB (target <= 50 MB)"
    )
    print(
        f"report --since 30d: {report_s_per_row * rows_30d:.1f} s over {rows_30d / 1e6:.1f} M "
        f"process rows, extrapolated from {report_s_per_row * 1e6:.2f} us a row (target <= 1 s)"
    )


if __name__ == "__main__":
    os.environ.setdefault("TZ", "UTC")
    main()
