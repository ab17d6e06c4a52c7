"""The host line (issue 28): CPU load, memory, swap, uptime; real here, simulated on fakes."""

from __future__ import annotations

import math
import os
import time

import psutil
import pytest
from helpers.dashboard import first_sample, make_app

from gputop.core.fake import BUILTIN_SCENARIOS, load_fake_nvml
from gputop.core.host_stats import (
    GIB,
    HostStats,
    host_line,
    read_host_stats,
    simulated_host_stats,
)
from gputop.core.sampling.source import open_backend
from gputop.tui.widgets.status_bar import HostBar


def test_this_machine_is_read_from_the_kernel() -> None:
    now = time.time()
    stats = read_host_stats(now)
    assert stats.cpu_count == os.cpu_count()
    assert stats.memory_total_bytes == psutil.virtual_memory().total
    assert stats.memory_used_bytes is not None
    assert 0 <= stats.memory_used_bytes <= stats.memory_total_bytes
    assert stats.uptime_s is not None
    assert abs(stats.uptime_s - (now - psutil.boot_time())) < 5
    assert stats.load_1m is not None and stats.load_1m >= 0


def test_the_line_has_every_reading_in_one_format() -> None:
    stats = HostStats(1.234, 0.5, 0.25, 16, 12 * GIB, 64 * GIB, 0, 8 * GIB, 3 * 86400 + 4 * 3600)
    assert host_line(stats) == (
        "up 3d04h  load 1.23 0.50 0.25 / 16 CPUs  mem 12.0 / 64.0 GiB  swap 0.0 / 8.0 GiB"
    )


def test_readings_that_failed_show_as_n_a_never_as_nan() -> None:
    stats = HostStats(math.nan, None, math.inf, None, None, 64 * GIB, None, None, None)
    assert host_line(stats) == "up N/A  load N/A N/A N/A  mem N/A  swap N/A"


def test_a_simulated_host_is_as_big_as_its_processes_need() -> None:
    stats = simulated_host_stats((120.0, 90.0, 60.0), [600 * GIB, None], uptime_s=10.0)
    assert (stats.load_1m, stats.load_5m, stats.load_15m) == (120.0, 90.0, 60.0)
    assert stats.cpu_count is not None and stats.cpu_count >= 180
    assert stats.memory_used_bytes is not None and stats.memory_total_bytes is not None
    assert stats.memory_used_bytes * 1.5 <= stats.memory_total_bytes


def test_a_simulated_host_is_the_same_on_every_machine_and_up_before_its_processes() -> None:
    backend = open_backend("demo", environ={"GPUTOP_FAKE_TIME": "30"})
    try:
        snapshot = backend.sample()
    finally:
        backend.close()
    stats = snapshot.host_stats
    assert stats is not None and stats.uptime_s is not None
    oldest = min(p.start_time for g in snapshot.gpus for p in g.processes if p.start_time)
    assert snapshot.timestamp - stats.uptime_s < oldest  # booted before every process
    assert stats.cpu_count == 64  # not this machine's


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
async def test_the_dashboard_shows_the_host_line_under_the_status_line(
    size: tuple[int, int],
) -> None:
    app = make_app("demo")
    async with app.run_test(size=size) as pilot:
        await first_sample(pilot)
        bar = app.query_one(HostBar)
        assert app.snapshot is not None and app.snapshot.host_stats is not None
        assert str(bar.render()).startswith("up ")
        assert bar.region.y == 1 and bar.region.height == 1


def test_a_simulated_hosts_load_moves_every_five_seconds_as_a_kernels_does() -> None:
    """A kernel recomputes its load averages every 5 s (LOAD_FREQ): the simulated host's
    load holds between, while its memory is read as it is each second."""

    def host_at(t: float) -> tuple[float, int]:
        stats = open_backend("dgx-h100", environ={"GPUTOP_FAKE_TIME": str(t)})
        try:
            host = stats.sample().host_stats
        finally:
            stats.close()
        assert host is not None and host.load_1m is not None
        assert host.memory_used_bytes is not None
        return host.load_1m, host.memory_used_bytes

    loads = {t: host_at(t) for t in (100.0, 101.0, 104.0, 105.0, 111.0)}
    assert loads[100.0][0] == loads[101.0][0] == loads[104.0][0]
    assert loads[105.0][0] != loads[104.0][0] or loads[111.0][0] != loads[105.0][0]
    assert len({memory for _, memory in loads.values()}) > 1


def test_a_simulated_hosts_three_load_averages_follow_its_load_as_a_kernels_do() -> None:
    """1, 5 and 15 minutes: each moves towards the CPUs busy at each 5 s recomputation by its
    own time constant, so after the load has moved they differ, the 1-minute one nearest to
    the load of the moment; a clock that steps back starts them again, never a NaN."""
    nvml = load_fake_nvml("dgx-h100", frozen_time=100.0)
    nvml.nvmlInit()
    try:
        first, _ = nvml.simulated_host_load()
        assert first[0] == first[1] == first[2] > 0  # as busy for a while: all the same
        busy = []
        for t in range(105, 605, 5):  # ten minutes of scenario time
            nvml.set_time(float(t))
            averages, _ = nvml.simulated_host_load()
            busy.append(nvml._busy_cpus(float(t)))
        assert len(set(averages)) == 3
        # a kernel's recurrence for each average, in floating point
        expected = []
        for window in (60.0, 300.0, 900.0):
            decay, average = math.exp(-5.0 / window), first[0]
            for load in busy:
                average = average * decay + load * (1.0 - decay)
            expected.append(average)
        assert list(averages) == pytest.approx(expected)
        assert all(min([*busy, first[0]]) <= a <= max([*busy, first[0]]) for a in averages)
        nvml.set_time(50.0)  # a clock stepped back
        stepped, _ = nvml.simulated_host_load()
        assert stepped[0] == stepped[1] == stepped[2] == nvml._busy_cpus(50.0)
        nvml.set_time(50.0 + 3600.0)  # an hour later at once: starts again too
        later, _ = nvml.simulated_host_load()
        assert later[0] == later[1] == later[2] and all(map(math.isfinite, later))
    finally:
        nvml.nvmlShutdown()


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_a_simulated_hosts_cpus_and_memory_hold_while_its_load_moves(scenario: str) -> None:
    """The simulated machine is sized once for the most its processes ever need (dgx-h100
    showed 128 CPUs, then 256, as its load moved): over 20 minutes of scenario time its CPU
    count and memory stay what they were, and still fit its busiest moment."""
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "0"})
    try:
        sizes, peak_load, peak_memory = set(), 0.0, 0
        for t in range(0, 1200, 10):
            backend.nvml.set_time(float(t))
            stats = backend.sample().host_stats
            assert stats is not None and stats.load_1m is not None
            assert stats.memory_used_bytes is not None
            sizes.add((stats.cpu_count, stats.memory_total_bytes))
            peak_load = max(peak_load, stats.load_1m)
            peak_memory = max(peak_memory, stats.memory_used_bytes)
    finally:
        backend.close()
    assert len(sizes) == 1, sizes
    ((cpus, memory_total),) = sizes
    assert cpus is not None and memory_total is not None
    assert peak_load * 1.5 <= cpus and peak_memory * 1.5 <= memory_total
