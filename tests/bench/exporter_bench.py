"""``make bench``, the exporter's part: one scrape, and the exporter's CPU, on dgx-h100.

The scenario is ``dgx-h100`` (8 simulated H100s, 200 GPU processes) with a live stand-in
per GPU process (``stand_ins.py``), so the exporter reads 200 real /proc entries per
sample, as on a real server. ``gputop exporter`` runs as its own process on loopback, with
its defaults (``--top`` 20, ``--interval`` 15 s), and the bench measures:

- **one scrape**: the wall time of a whole ``GET /metrics`` (connect, build, send, read),
  each taken just after a new sample, so every scrape builds that sample's families (the
  costly case; a second scrape of the same sample sends families already built);
- **exporter CPU** (process and children, % of one core) over a window in which it is
  scraped every 15 s, as Prometheus would, sampling every interval meanwhile.

Median (min-max) of several runs against the targets of issue 20; exits 1 when one is
missed. A benchmark, not a test: its name keeps pytest from collecting it.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(Path(__file__).resolve().parent)]

from stand_ins import live_scenario  # noqa: E402

SCENARIO = REPO / "gputop" / "core" / "fake" / "scenarios" / "dgx-h100.json"
SCRAPE_INTERVAL_S = 15.0
TARGET_SCRAPE_MS = 50.0
TARGET_CPU_PERCENT = 0.5
EXPORTER = (sys.executable, "-m", "gputop", "exporter")
SERVING = re.compile(r"serving (\S+)")


def start_exporter(scenario: Path, interval_s: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            *EXPORTER,
            "--fake",
            str(scenario),
            "--listen",
            "127.0.0.1:0",
            "--interval",
            f"{interval_s:g}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([process.stderr], [], [], 1.0)[0]:
            match = SERVING.search(process.stderr.readline())
            if match:
                return process, match.group(1)
    process.kill()
    raise SystemExit("gputop exporter did not start")


def scrape_ms(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as response:
        body = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    assert b"gputop_process_memory_used_bytes" in body
    return elapsed


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system + times.children_user + times.children_system)


def measure_scrapes(scenario: Path, count: int) -> list[float]:
    """Scrapes each just after a new sample (interval 1 s, scraped every 1.05 s)."""
    process, url = start_exporter(scenario, 1.0)
    try:
        scrape_ms(url)  # the first connection, bytecode caches warm
        results = []
        for _ in range(count):
            time.sleep(1.05)
            results.append(scrape_ms(url))
        return results
    finally:
        process.terminate()
        process.wait(timeout=20)


def measure_cpu(scenario: Path, window_s: float, interval_s: float) -> float:
    """% of one core over ``window_s``, scraped every 15 s, after a warm-up."""
    process, url = start_exporter(scenario, interval_s)
    try:
        watched = psutil.Process(process.pid)
        scrape_ms(url)
        time.sleep(2 * interval_s)  # past start-up and the first samples
        before, started = cpu_s(watched), time.monotonic()
        next_scrape = started
        while time.monotonic() - started < window_s:
            if time.monotonic() >= next_scrape:
                scrape_ms(url)
                next_scrape += SCRAPE_INTERVAL_S
            time.sleep(0.2)
        return 100 * (cpu_s(watched) - before) / (time.monotonic() - started)
    finally:
        process.terminate()
        process.wait(timeout=20)


def summary(values: list[float], unit: str) -> str:
    return f"{statistics.median(values):.2f} {unit} ({min(values):.2f}-{max(values):.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--cpu-runs", type=int, default=2)
    parser.add_argument("--window", type=float, default=90.0, help="CPU window, seconds")
    parser.add_argument("--interval", type=float, default=15.0, help="exporter --interval")
    args = parser.parse_args(argv)
    print(f"exporter on dgx-h100, load average {os.getloadavg()[0]:.2f}")
    with live_scenario(SCENARIO) as (scenario, stand_ins):
        scrapes = measure_scrapes(scenario, args.scrapes)
        cpus = [measure_cpu(scenario, args.window, args.interval) for _ in range(args.cpu_runs)]
    scrape_ok = statistics.median(scrapes) <= TARGET_SCRAPE_MS
    cpu_ok = statistics.median(cpus) <= TARGET_CPU_PERCENT
    print(f"  {stand_ins} live GPU processes")
    print(f"  one scrape: {summary(scrapes, 'ms')}, target <= {TARGET_SCRAPE_MS:g} ms", end="")
    print("" if scrape_ok else "  MISSED")
    print(
        f"  exporter CPU (--interval {args.interval:g} s, scraped every "
        f"{SCRAPE_INTERVAL_S:g} s): {summary(cpus, '%')}, target <= {TARGET_CPU_PERCENT:g} %",
        end="",
    )
    print("" if cpu_ok else "  MISSED")
    return 0 if scrape_ok and cpu_ok else 1


if __name__ == "__main__":
    sys.exit(main())
