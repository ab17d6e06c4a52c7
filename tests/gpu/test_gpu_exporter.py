"""``gputop exporter``'s dcgm-exporter gauges against ``nvidia-smi`` read around a scrape."""

from __future__ import annotations

import re
import selectors
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from gpu.driver import DRIVER

if not DRIVER.present:
    pytest.skip(DRIVER.reason, allow_module_level=True)

from gpu import compare
from gpu.conftest import smi_query

SERVING = re.compile(r"serving (http://\S+)")


@pytest.fixture
def exporter(env: dict[str, str]) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "gputop", "exporter", "--listen", "127.0.0.1:0", "--interval", "1"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert process.stderr is not None
        ready = selectors.DefaultSelector()
        ready.register(process.stderr, selectors.EVENT_READ)
        line = process.stderr.readline() if ready.select(timeout=120) else ""
        match = SERVING.search(line)
        assert match, f"the exporter did not say where it serves within 120 s: {line!r}"
        yield match.group(1).rstrip("/") + "/metrics"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return compare.parse_prometheus(response.read().decode())


def _last_sample(samples: list[tuple[str, dict[str, str], float]]) -> float:
    return max(
        (value for name, _, value in samples if name == "gputop_last_sample_timestamp_seconds"),
        default=0.0,
    )


def test_exporter_values_equal_nvidia_smi(result, exporter) -> None:
    before = smi_query()
    asked = time.time()
    deadline = time.monotonic() + 30
    samples = _scrape(exporter)
    while _last_sample(samples) < asked and time.monotonic() < deadline:
        time.sleep(0.2)  # a sample taken after nvidia-smi's first reading
        samples = _scrape(exporter)
    after = smi_query()
    assert _last_sample(samples) >= asked, "the exporter took no new sample in 30 s"
    result.comparisons += compare.compare_readings(
        compare.readings_from_exporter(samples), before, after, source="the exporter"
    )
    assert result.comparisons
    assert not result.failed, [c.to_json() for c in result.failed]
