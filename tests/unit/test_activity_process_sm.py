"""Per-process SM % on the simulated driver: the R550 call first, the older one before R550.

docs/activity.md ("Per-process SM %"): from R550 gputop asks
``nvmlDeviceGetProcessesUtilizationInfo``, where a process without a sample is unknown, never
0; older drivers lack the symbol (FUNCTION_NOT_FOUND) and gputop asks
``nvmlDeviceGetProcessUtilization``, where a process without a sample was idle. The fake
answers the R550 call as the driver and the C imitation do, in the C convention the binding's
wrapper relies on (a call for the count, INSUFFICIENT_SIZE, a call with the array).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Iterator
from typing import Any

import pynvml
import pytest
from helpers.scenarios import minimal_gpu

from gputop.core.fake import FakeNvml
from gputop.core.fake.c_calls import UTILIZATION_INFO, UTILIZATION_INFO_V1
from gputop.core.fake.scenario import parse_scenario
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.nvml_processes import INFO_CALL

OpenFake = Callable[..., NvmlBackend]
WriteScenario = Callable[..., str]
BUSY, IDLE, UNMEASURED, WAVY = 4_194_301, 4_194_302, 4_194_303, 4_194_300
AT_S = 37.6
"""Not on a whole second: the driver's sample is the one of second 37."""
WAVE = {"base": 40, "amp": 30, "period": 7, "phase": 0.2, "min": 0, "max": 100}
PROCESSES = [
    {"pid": BUSY, "type": "C", "used_memory_mib": 100, "sm_util": 20, "mem_util": 9},
    {"pid": IDLE, "type": "C", "used_memory_mib": 100, "sm_util": 0},
    {"pid": UNMEASURED, "type": "C", "used_memory_mib": 100},
    {"pid": WAVY, "type": "C", "used_memory_mib": 100, "sm_util": WAVE},
]
R550, R535 = "550.127.05", "535.154.05"


def _document(driver: str, **top: Any) -> dict[str, Any]:
    return {
        "description": "per-process SM",
        "driver_version": driver,
        "cuda_driver_version": 12040,
        # busy enough for its processes' SM % (at most 20 + 70) as asked: fake/card_load.py
        "gpus": [minimal_gpu(processes=PROCESSES, utilization_gpu=90)],
        **top,
    }


def _wave_at_sample() -> int:
    """The scenario's SM % of WAVY in the driver's sample of AT_S (second 37), as NVML's
    unsigned int."""
    scenario = parse_scenario(_document(R550), "expected")
    (wavy,) = [p for p in scenario.gpus[0].processes if p.pid == WAVY]
    assert wavy.sm_util is not None
    return min(100, max(0, round(wavy.sm_util.value_at(math.floor(AT_S)))))


def _sm_by_pid(
    fake_backend: OpenFake, scenario_file: WriteScenario, driver: str, **top: Any
) -> tuple[dict[int, int | None], NvmlBackend]:
    backend = fake_backend(
        scenario_file(_document(driver)["gpus"], driver_version=driver, **top), AT_S
    )
    gpu = backend.sample().gpus[0]
    return {p.pid: p.sm_util_percent for p in gpu.processes}, backend


def test_on_r550_the_sm_percent_is_the_scenarios_and_an_unsampled_process_is_unknown(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    sm, backend = _sm_by_pid(fake_backend, scenario_file, R550)
    assert sm == {BUSY: 20, IDLE: 0, UNMEASURED: None, WAVY: _wave_at_sample()}
    assert backend._reader.has(INFO_CALL)  # the R550 call answered: not marked missing


@pytest.mark.parametrize(
    ("driver", "top"),
    [
        (R535, {}),
        (R550, {"missing_functions": [UTILIZATION_INFO]}),
    ],
    ids=["R535-lacks-the-symbol", "R550-symbol-missing"],
)
def test_without_the_r550_call_gputop_falls_back_and_an_unsampled_process_was_idle(
    fake_backend: OpenFake, scenario_file: WriteScenario, driver: str, top: dict[str, Any]
) -> None:
    """The older call lists only processes that ran: one without a sample reads 0."""
    sm, backend = _sm_by_pid(fake_backend, scenario_file, driver, **top)
    assert sm == {BUSY: 20, IDLE: 0, UNMEASURED: 0, WAVY: _wave_at_sample()}
    assert not backend._reader.has(INFO_CALL)  # asked once, then never again


def test_on_r550_no_measured_process_leaves_every_one_unknown(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    """NOT_FOUND from the R550 call (no process measured) is no sample for anyone: unknown,
    not the old call's "nobody ran"."""
    unmeasured = [{"pid": UNMEASURED, "type": "C", "used_memory_mib": 100}]
    path = scenario_file([minimal_gpu(processes=unmeasured)])
    gpu = fake_backend(path, AT_S).sample().gpus[0]
    assert [p.sm_util_percent for p in gpu.processes] == [None]


# -- the fake's symbol, as the binding's wrapper calls it --------------------------------------


@pytest.fixture
def nvml() -> Iterator[FakeNvml]:
    fake = FakeNvml(parse_scenario(_document(R550), "test"), frozen_time=AT_S)
    fake.nvmlInit()
    yield fake
    fake.nvmlShutdown()


def _call(nvml: FakeNvml, info: Any) -> int:
    fn = nvml._nvmlGetFunctionPointer(UTILIZATION_INFO)
    return int(fn(nvml.nvmlDeviceGetHandleByIndex(0), ctypes.byref(info)))


def _request(count: int = 0, last_seen: int = 0) -> Any:
    info = pynvml.c_nvmlProcessesUtilizationInfo_v1_t()
    info.version = pynvml.ProcessesUtilizationInfo_v1
    info.processSamplesCount = count
    info.lastSeenTimeStamp = last_seen
    return info


def test_the_symbol_sizes_first_then_writes_a_sample_per_measured_process(
    nvml: FakeNvml,
) -> None:
    assert pynvml.ProcessesUtilizationInfo_v1 == UTILIZATION_INFO_V1
    info = _request()
    assert _call(nvml, info) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    assert info.processSamplesCount == 3  # the unmeasured process has no sample
    small = (pynvml.c_nvmlProcessUtilizationInfo_v1_t * 2)()
    info.processSamplesCount, info.procUtilArray = 2, small
    assert _call(nvml, info) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE  # too small: not written
    assert [s.pid for s in small] == [0, 0]
    array = (pynvml.c_nvmlProcessUtilizationInfo_v1_t * 3)()
    info.processSamplesCount, info.procUtilArray = 3, array
    assert _call(nvml, info) == pynvml.NVML_SUCCESS
    stamp = round((nvml.scenario.start_time + math.floor(AT_S)) * 1_000_000)
    assert [(s.pid, s.smUtil, s.memUtil, s.timeStamp) for s in array] == [
        (BUSY, 20, 9, stamp),
        (IDLE, 0, 0, stamp),
        (WAVY, _wave_at_sample(), 0, stamp),
    ]
    info = _request(last_seen=stamp)
    assert _call(nvml, info) == pynvml.NVML_ERROR_NOT_FOUND  # nothing newer than that


def test_the_symbol_refuses_another_struct_version(nvml: FakeNvml) -> None:
    info = _request()
    info.version = 2 << 24 | ctypes.sizeof(info)
    assert _call(nvml, info) == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH


def test_before_r550_the_symbol_is_not_there() -> None:
    fake = FakeNvml(parse_scenario(_document(R535), "test"), frozen_time=AT_S)
    fake.nvmlInit()
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        fake._nvmlGetFunctionPointer(UTILIZATION_INFO)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        fake.nvmlDeviceGetProcessesUtilizationInfo(fake.nvmlDeviceGetHandleByIndex(0), 0)


def test_the_real_bindings_wrapper_over_the_symbol_answers_as_the_fakes_function(
    nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvidia-ml-py's own ``nvmlDeviceGetProcessesUtilizationInfo`` (count, INSUFFICIENT_SIZE,
    array) runs unchanged against the simulated symbol and reads what the fake's gives."""
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    fakes = [
        (s.pid, s.smUtil, s.timeStamp)
        for s in nvml.nvmlDeviceGetProcessesUtilizationInfo(handle, 0)
    ]
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer", nvml._nvmlGetFunctionPointer)
    real = pynvml.nvmlDeviceGetProcessesUtilizationInfo(handle, 0)
    assert [(s.pid, s.smUtil, s.timeStamp) for s in real] == fakes
    assert {pid for pid, _sm, _t in fakes} == {BUSY, IDLE, WAVY}
