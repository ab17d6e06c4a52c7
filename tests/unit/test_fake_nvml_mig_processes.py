"""The simulated NVML module: MIG devices, process lists and utilisation, and the clock."""

from __future__ import annotations

import time
from typing import Any

import pynvml
import pytest
from helpers.fake_nvml import (
    FULL_GPU,
    MIB,
    MIG_GPU,
    MIG_UUIDS,
    NOT_ON_MIG,
    START,
    first_handle,
    make_nvml,
)

from gputop.core.fake import BUILTIN_SCENARIOS, FakeNvml, load_fake_nvml
from gputop.core.fake.nvml import FakeDeviceHandle
from gputop.core.fake.process_calls import SimulatedProcess

# -- MIG -------------------------------------------------------------------------------------


def test_a_gpu_in_mig_mode_offers_seven_slots_and_fills_the_first_ones() -> None:
    nvml = make_nvml(MIG_GPU)
    gpu = first_handle(nvml)
    assert nvml.nvmlDeviceGetMigMode(gpu) == [1, 1]
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(gpu) == 7
    assert nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 1) == FakeDeviceHandle(0, 1)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 2)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 7)


def test_a_mig_capable_gpu_with_mig_off_has_no_slots() -> None:
    nvml = make_nvml({**FULL_GPU, "mig_mode": [0, 1]})
    gpu = first_handle(nvml)
    assert nvml.nvmlDeviceGetMigMode(gpu) == [0, 1]
    assert nvml.nvmlDeviceGetMaxMigDeviceCount(gpu) == 0


def test_a_mig_handle_has_its_own_identity_memory_and_sms() -> None:
    nvml = make_nvml(MIG_GPU)
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(first_handle(nvml), 0)
    assert nvml.nvmlDeviceIsMigDeviceHandle(mig)
    assert not nvml.nvmlDeviceIsMigDeviceHandle(first_handle(nvml))
    assert nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig) == first_handle(nvml)
    assert nvml.nvmlDeviceGetUUID(mig) == MIG_UUIDS[0]
    assert nvml.nvmlDeviceGetName(mig) == "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    assert nvml.nvmlDeviceGetGpuInstanceId(mig) == 2
    assert nvml.nvmlDeviceGetComputeInstanceId(mig) == 0
    memory = nvml.nvmlDeviceGetMemoryInfo(mig)
    assert (memory.total, memory.used) == (40192 * MIB, 1024 * MIB)
    attributes = nvml.nvmlDeviceGetAttributes(mig)
    assert attributes.multiprocessorCount == 42
    assert attributes.gpuInstanceSliceCount == 3
    assert attributes.memorySizeMB == 40192


def test_instance_ids_of_a_whole_gpu_are_invalid_argument() -> None:
    nvml = make_nvml(MIG_GPU)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetGpuInstanceId(first_handle(nvml))
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(first_handle(nvml))


def test_board_readings_on_a_mig_handle_are_not_supported() -> None:
    nvml = make_nvml(MIG_GPU)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetTemperature(FakeDeviceHandle(0, 0), pynvml.NVML_TEMPERATURE_GPU)


def test_a_mig_mode_gpu_lists_the_processes_of_all_its_mig_devices() -> None:
    nvml = make_nvml(MIG_GPU)
    processes = nvml.nvmlDeviceGetComputeRunningProcesses(first_handle(nvml))
    assert [(p.pid, p.gpuInstanceId, p.computeInstanceId) for p in processes] == [
        (4200010, 2, 0),
        (4200011, 9, 0),
    ]


def test_a_mig_handle_lists_only_its_own_processes() -> None:
    nvml = make_nvml(MIG_GPU)
    processes = nvml.nvmlDeviceGetComputeRunningProcesses(FakeDeviceHandle(0, 1))
    assert [(p.pid, p.usedGpuMemory, p.gpuInstanceId) for p in processes] == [
        (4200011, 300 * MIB, 9)
    ]


# -- processes -------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "_v3", "_v2"])
def test_compute_processes_are_types_c_and_cg_with_memory_in_bytes(suffix: str) -> None:
    nvml = make_nvml()
    processes = getattr(nvml, f"nvmlDeviceGetComputeRunningProcesses{suffix}")(first_handle(nvml))
    assert [(p.pid, p.usedGpuMemory) for p in processes] == [
        (4200001, 700 * MIB),
        (4200003, None),
    ]
    assert {(p.gpuInstanceId, p.computeInstanceId) for p in processes} == {(NOT_ON_MIG,) * 2}


@pytest.mark.parametrize("suffix", ["", "_v3", "_v2"])
def test_graphics_processes_are_types_g_and_cg(suffix: str) -> None:
    nvml = make_nvml()
    processes = getattr(nvml, f"nvmlDeviceGetGraphicsRunningProcesses{suffix}")(first_handle(nvml))
    assert [p.pid for p in processes] == [4200002, 4200003]


def test_process_utilization_gives_one_sample_per_measured_process() -> None:
    nvml = make_nvml(at=12.5)
    samples = nvml.nvmlDeviceGetProcessUtilization(first_handle(nvml), 0)
    assert [(s.pid, s.smUtil, s.memUtil) for s in samples] == [(4200001, 60, 20), (4200003, 5, 0)]
    assert {s.timeStamp for s in samples} == {int((START + 12) * 1_000_000)}


def test_process_utilization_has_nothing_newer_than_the_last_sample_seen() -> None:
    nvml = make_nvml(at=12.5)
    handle = first_handle(nvml)
    newest = nvml.nvmlDeviceGetProcessUtilization(handle, 0)[0].timeStamp
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetProcessUtilization(handle, newest)


def test_process_utilization_moves_on_with_the_clock() -> None:
    earlier = make_nvml(at=12.5)
    later = make_nvml(at=13.5)
    seen = earlier.nvmlDeviceGetProcessUtilization(first_handle(earlier), 0)[0].timeStamp
    (sample, _) = later.nvmlDeviceGetProcessUtilization(first_handle(later), seen)
    assert sample.timeStamp - seen == 1_000_000


def test_process_utilization_at_time_zero_still_has_a_sample() -> None:
    nvml = make_nvml(at=0.0)
    assert nvml.nvmlDeviceGetProcessUtilization(first_handle(nvml), 0)


def test_a_simulated_process_has_the_scenarios_host_facts() -> None:
    nvml = make_nvml(at=10.0)
    assert nvml.simulated_process(4200001) == SimulatedProcess(
        user="alice",
        command=("python", "train.py"),
        cpu_percent=99.5,
        host_memory_bytes=2048 * MIB,
        start_time=START - 3600,
    )


def test_a_simulated_process_without_user_or_cmd_is_unknown_to_the_host() -> None:
    nvml = make_nvml()
    assert nvml.simulated_process(4200003) is None
    assert nvml.simulated_process(12345) is None


# -- the clock -------------------------------------------------------------------------------


def test_a_frozen_clock_fixes_scenario_time_and_epoch_time() -> None:
    nvml = make_nvml(at=42.0)
    assert nvml.now() == 42.0
    assert nvml.epoch_time() == START + 42.0


def test_start_time_sets_the_epoch_of_a_frozen_clock() -> None:
    assert make_nvml(at=1.0, start_time=1000.0).epoch_time() == 1001.0


def test_set_time_moves_a_frozen_clock() -> None:
    nvml = make_nvml({**FULL_GPU, "lost_after_s": 5}, at=1.0)
    nvml.nvmlDeviceGetName(first_handle(nvml))
    nvml.set_time(10)
    assert (nvml.now(), nvml.epoch_time()) == (10.0, START + 10.0)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetName(FakeDeviceHandle(0))


def test_a_running_clock_counts_from_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [500.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    nvml = make_nvml(at=None)
    now[0] = 507.5
    assert nvml.now() == 7.5


@pytest.mark.parametrize("name", BUILTIN_SCENARIOS)
def test_a_frozen_clock_gives_identical_readings(name: str) -> None:
    def readings(nvml: FakeNvml) -> list[Any]:
        nvml.nvmlInit()
        values = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            for function in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetFanSpeed"):
                try:
                    values.append(getattr(nvml, function)(handle))
                except pynvml.NVMLError as error:
                    values.append(type(error))
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            values.append((memory.used, memory.free))
        return values

    assert readings(load_fake_nvml(name, 3.7)) == readings(load_fake_nvml(name, 3.7))


def test_a_scenario_moves_over_time() -> None:
    def power(at: float) -> int:
        nvml = load_fake_nvml("demo", at)
        nvml.nvmlInit()
        return nvml.nvmlDeviceGetPowerUsage(nvml.nvmlDeviceGetHandleByIndex(0))

    assert len({power(t) for t in (0.0, 3.0, 6.0, 9.0)}) > 1
