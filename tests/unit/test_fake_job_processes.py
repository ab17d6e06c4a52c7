"""The fake lists live processes pinned to simulated cards, and counts energy and accounting.

Real child processes carry the pinning in their environment, as a launched job does; the
fake must find them through /proc as the driver would list their contexts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psutil
import pynvml
import pytest
from helpers.cuda_view import running_sleeper
from helpers.fake_nvml import FULL_GPU, MIB, SECOND_GPU, UUID_0, UUID_1, make_nvml
from helpers.waiting import wait_for

from gputop.core.errors import ScenarioError
from gputop.core.fake.scenario import parse_scenario

PROFILE = {"used_memory_mib": 512, "sm_util": 40, "mem_util": 10}
PLAIN_GPU = {**FULL_GPU, "processes": []}
PLAIN_SECOND = {**SECOND_GPU, "processes": []}


@pytest.fixture(name="pinned")
def pinned_fixture() -> Iterator[Any]:
    """Start a sleeping process pinned by ``CUDA_VISIBLE_DEVICES``; all are killed after."""
    started: list[subprocess.Popen[bytes]] = []

    def start(visible: str, *argv: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible}
        process = subprocess.Popen(list(argv), env=env) if argv else running_sleeper(env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def listed(nvml: Any, index: int) -> dict[int, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    return {p.pid: p for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}


def test_a_pinned_process_is_listed_on_its_cards_with_the_profile(pinned: Any) -> None:
    nvml = make_nvml(PLAIN_GPU, PLAIN_SECOND, job_profile=PROFILE)
    job = pinned(UUID_1)
    found = wait_for(lambda: listed(nvml, 1).get(job.pid), "the pinned process on GPU 1")
    assert found.usedGpuMemory == 512 * MIB
    assert job.pid not in listed(nvml, 0)
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    samples = nvml.nvmlDeviceGetProcessUtilization(handle, 0)
    assert [(s.pid, s.smUtil, s.memUtil) for s in samples] == [(job.pid, 40, 10)]
    job.kill()
    job.wait()
    wait_for(lambda: job.pid not in listed(nvml, 1), "the ended process to leave the list")


def test_pinning_stops_at_the_first_entry_naming_no_simulated_card(pinned: Any) -> None:
    nvml = make_nvml(PLAIN_GPU, PLAIN_SECOND, job_profile=PROFILE)
    both = pinned(f"{UUID_0},{UUID_1}")
    cut = pinned(f"{UUID_0},GPU-00000000-0000-0000-0000-000000000000,{UUID_1}")
    wait_for(lambda: {both.pid, cut.pid} <= set(listed(nvml, 0)), "both on GPU 0")
    assert both.pid in listed(nvml, 1)
    assert cut.pid not in listed(nvml, 1)


def test_only_the_topmost_of_a_pinned_tree_is_listed(pinned: Any) -> None:
    shell = pinned(UUID_0, "sh", "-c", f"{sys.executable} -c 'import time; time.sleep(60)'; :")
    children = wait_for(lambda: psutil.Process(shell.pid).children(), "the shell's child")
    nvml = make_nvml(PLAIN_GPU, job_profile=PROFILE)  # its first scan sees both
    assert shell.pid in listed(nvml, 0)
    assert children[0].pid not in listed(nvml, 0)


def test_without_a_job_profile_pinned_processes_are_not_listed(pinned: Any) -> None:
    nvml = make_nvml(PLAIN_GPU)
    job = pinned(UUID_0)
    wait_for(lambda: os.path.exists(f"/proc/{job.pid}/environ"), "the process")
    assert listed(nvml, 0) == {}


def test_energy_is_the_power_summed_from_the_scenario_start() -> None:
    nvml = make_nvml(PLAIN_GPU, {**PLAIN_SECOND, "power_w": {"base": 100, "amp": 50, "period": 7}})
    first, second = (nvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(first) == round(250.5 * 10 * 1000)
    readings = []
    for t in (0, 0.5, 3, 3.25, 20, 20.75):
        nvml.set_time(t)
        readings.append(nvml.nvmlDeviceGetTotalEnergyConsumption(second))
    assert readings == sorted(readings) and readings[0] == 0 and readings[-1] > 0
    bare = make_nvml({**PLAIN_GPU, "power_w": None})
    with pytest.raises(pynvml.NVMLError_NotSupported):
        bare.nvmlDeviceGetTotalEnergyConsumption(bare.nvmlDeviceGetHandleByIndex(0))


def test_accounting_stats_follow_the_accounting_mode(pinned: Any) -> None:
    profile = {"used_memory_mib": {"base": 1000, "amp": 500, "period": 4}, "sm_util": 30}
    nvml = make_nvml({**PLAIN_GPU, "accounting_mode": True}, job_profile=profile)
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetAccountingMode(handle) == pynvml.NVML_FEATURE_ENABLED
    job = pinned(UUID_0)
    wait_for(lambda: job.pid in listed(nvml, 0), "the pinned process")
    wait_for(lambda: nvml.nvmlDeviceGetAccountingStats(handle, job.pid).time >= 1100, "1 s")
    stats = nvml.nvmlDeviceGetAccountingStats(handle, job.pid)
    assert stats.maxMemoryUsage == 1500 * MIB  # the wave's top at an age of 1 s
    assert stats.gpuUtilization == 30 and stats.isRunning == 1
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetAccountingStats(handle, 4200001)
    off = make_nvml({**PLAIN_GPU, "accounting_mode": False}, job_profile=profile)
    off_handle = off.nvmlDeviceGetHandleByIndex(0)
    assert off.nvmlDeviceGetAccountingMode(off_handle) == pynvml.NVML_FEATURE_DISABLED
    with pytest.raises(pynvml.NVMLError_NotSupported):
        off.nvmlDeviceGetAccountingStats(off_handle, job.pid)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        make_nvml(PLAIN_GPU).nvmlDeviceGetAccountingMode(handle)


def test_a_misspelt_job_profile_field_is_an_error() -> None:
    document = {"gpus": [PLAIN_GPU], "job_profile": {"used_memory": 5}}
    with pytest.raises(ScenarioError, match="used_memory"):
        parse_scenario(document, "test.json")
