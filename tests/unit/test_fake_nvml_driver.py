"""The simulated NVML answers as real drivers do where they differ from nvml.h's promises.

So that tests on the fake hide nothing a real machine would show (issue 9, item 7).
"""

from __future__ import annotations

import ctypes
from typing import Any

import pynvml
import pytest
from helpers.fake_nvml import FULL_GPU, MIB, MIG_GPU, first_handle, make_nvml

from gputop.core.fake.nvml import FakeDeviceHandle

PID = 4_300_001
PROCESSES = [
    {"pid": PID, "type": "C", "used_memory_mib": 700, "sm_util": 40},
    {"pid": PID + 1, "type": "C", "used_memory_mib": 300, "sm_util": 0},
    {"pid": PID + 2, "type": "M+C", "used_memory_mib": 200},
]
GPU = {**FULL_GPU, "processes": PROCESSES, "memory_used_mib": 1200, "memory_reserved_mib": 512}
"""Its processes hold 700 + 300 + 200 MiB of its 1200 in use (a card holds at least what its
processes hold: fake/card_load.py)."""


def _error_code(call: Any) -> int:
    with pytest.raises(pynvml.NVMLError) as caught:
        call()
    return int(caught.value.value)


class _Entry24(ctypes.Structure):
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


def _c_list(nvml: Any, symbol: str, entry: type[ctypes.Structure], capacity: int) -> Any:
    function = nvml._nvmlGetFunctionPointer(symbol)
    count = ctypes.c_uint(capacity)
    entries = (entry * capacity)()
    result = function(first_handle(nvml), ctypes.pointer(count), entries)
    return result, count.value, entries


# -- attributes, memory ---------------------------------------------------------------------


def test_attributes_are_not_supported_on_a_whole_gpu() -> None:
    nvml = make_nvml(GPU)
    code = _error_code(lambda: nvml.nvmlDeviceGetAttributes_v2(first_handle(nvml)))
    assert code == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_attributes_answer_for_a_mig_device() -> None:
    nvml = make_nvml(MIG_GPU)
    attributes = nvml.nvmlDeviceGetAttributes_v2(FakeDeviceHandle(0, 0))
    assert attributes.multiprocessorCount == 42


def test_v1_memory_used_includes_what_the_driver_reserves() -> None:
    nvml = make_nvml(GPU)
    memory = nvml.nvmlDeviceGetMemoryInfo(first_handle(nvml))
    assert memory.used == (1200 + 512) * MIB
    assert memory.free == (81920 - 1200 - 512) * MIB


def test_v2_memory_reports_reserved_apart_from_used() -> None:
    nvml = make_nvml(GPU)
    memory = nvml.nvmlDeviceGetMemoryInfo(first_handle(nvml), pynvml.nvmlMemory_v2)
    assert (memory.used, memory.reserved) == (1200 * MIB, 512 * MIB)
    assert memory.total == memory.used + memory.reserved + memory.free


def test_v2_memory_is_missing_on_a_driver_without_its_symbol() -> None:
    nvml = make_nvml(GPU, missing_functions=["nvmlDeviceGetMemoryInfo_v2"])
    code = _error_code(
        lambda: nvml.nvmlDeviceGetMemoryInfo(first_handle(nvml), pynvml.nvmlMemory_v2)
    )
    assert code == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND


# -- process samples ------------------------------------------------------------------------


def test_process_samples_leave_out_idle_processes() -> None:
    nvml = make_nvml(GPU)
    samples = nvml.nvmlDeviceGetProcessUtilization(first_handle(nvml), 0)
    assert [(s.pid, s.smUtil) for s in samples] == [(PID, 40)]


def test_process_samples_are_not_found_when_no_process_ran() -> None:
    idle = [{**p, "sm_util": 0} for p in PROCESSES[:2]]
    nvml = make_nvml({**FULL_GPU, "processes": idle})
    code = _error_code(lambda: nvml.nvmlDeviceGetProcessUtilization(first_handle(nvml), 0))
    assert code == pynvml.NVML_ERROR_NOT_FOUND


# -- errors a scenario sets -------------------------------------------------------------------


def test_a_refused_handle_is_no_permission() -> None:
    nvml = make_nvml({**GPU, "no_permission": ["nvmlDeviceGetHandleByIndex"]})
    code = _error_code(lambda: nvml.nvmlDeviceGetHandleByIndex(0))
    assert code == pynvml.NVML_ERROR_NO_PERMISSION


def test_the_cuda_version_v2_call_can_find_no_libcuda() -> None:
    nvml = make_nvml(
        GPU, function_errors={"nvmlSystemGetCudaDriverVersion_v2": "LIBRARY_NOT_FOUND"}
    )
    code = _error_code(nvml.nvmlSystemGetCudaDriverVersion_v2)
    assert code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    assert nvml.nvmlSystemGetCudaDriverVersion() == 12040


def test_a_gpu_function_error_applies_to_that_gpu_only() -> None:
    nvml = make_nvml(
        {**GPU, "function_errors": {"nvmlDeviceGetFanSpeed": "UNKNOWN"}},
        {**FULL_GPU, "uuid": "GPU-0c4e3a71-5b8d-4f1e-9a2c-7d6b5e4f3a21", "pci_bus_id": None},
    )
    code = _error_code(lambda: nvml.nvmlDeviceGetFanSpeed(nvml.nvmlDeviceGetHandleByIndex(0)))
    assert code == pynvml.NVML_ERROR_UNKNOWN
    assert nvml.nvmlDeviceGetFanSpeed(nvml.nvmlDeviceGetHandleByIndex(1)) == 45


# -- sensors and fields ------------------------------------------------------------------------


def test_temperature_v_gives_the_temperature() -> None:
    nvml = make_nvml(GPU)
    assert nvml.nvmlDeviceGetTemperatureV(first_handle(nvml), pynvml.NVML_TEMPERATURE_GPU) == 61


def test_the_nvlink_link_count_is_a_field_value() -> None:
    nvml = make_nvml(GPU)
    (value,) = nvml.nvmlDeviceGetFieldValues(
        first_handle(nvml), [pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT]
    )
    assert (value.nvmlReturn, value.valueType) == (0, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT)
    assert value.value.uiVal == 12


def test_a_fan_may_report_more_than_100_percent() -> None:
    nvml = make_nvml({**GPU, "fan_percent": 110})
    assert nvml.nvmlDeviceGetFanSpeed(first_handle(nvml)) == 110


def test_performance_state_32_is_passed_through_as_the_driver_reports_it() -> None:
    nvml = make_nvml({**GPU, "performance_state": 32})
    assert nvml.nvmlDeviceGetPerformanceState(first_handle(nvml)) == pynvml.NVML_PSTATE_UNKNOWN


# -- C symbols --------------------------------------------------------------------------------


def test_a_symbol_the_driver_generation_lacks_is_not_found() -> None:
    nvml = make_nvml(GPU, missing_functions=["nvmlDeviceGetComputeRunningProcesses_v3"])
    code = _error_code(
        lambda: nvml._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses_v3")
    )
    assert code == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND


def test_symbol_lookup_before_init_is_uninitialized() -> None:
    nvml = make_nvml(GPU, init=False)
    code = _error_code(lambda: nvml._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2"))
    assert code == pynvml.NVML_ERROR_UNINITIALIZED


def test_a_list_call_asks_for_room_then_fills_it() -> None:
    nvml = make_nvml(GPU)
    function = nvml._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses_v3")
    count = ctypes.c_uint(0)
    first = function(first_handle(nvml), ctypes.pointer(count), None)
    assert (first, count.value) == (pynvml.NVML_ERROR_INSUFFICIENT_SIZE, 2)
    result, written, entries = _c_list(nvml, "nvmlDeviceGetComputeRunningProcesses_v3", _Entry24, 5)
    assert (result, written) == (pynvml.NVML_SUCCESS, 2)
    assert [(e.pid, e.usedGpuMemory) for e in entries[:2]] == [
        (PID, 700 * MIB),
        (PID + 1, 300 * MIB),
    ]


def test_the_mps_list_holds_the_mps_clients_only() -> None:
    nvml = make_nvml(GPU)
    result, written, entries = _c_list(
        nvml, "nvmlDeviceGetMPSComputeRunningProcesses_v3", _Entry24, 5
    )
    assert (result, written) == (pynvml.NVML_SUCCESS, 1)
    assert entries[0].pid == PID + 2


def test_a_535_54_driver_writes_32_byte_entries_that_a_24_byte_reader_misreads() -> None:
    nvml = make_nvml(GPU, driver_version="535.54.03")
    _, written, entries = _c_list(nvml, "nvmlDeviceGetComputeRunningProcesses_v3", _Entry24, 8)
    assert written == 2
    assert entries[0].pid == PID
    assert entries[1].pid != PID + 1


def test_a_535_104_driver_writes_24_byte_entries_again() -> None:
    nvml = make_nvml(GPU, driver_version="535.104.05")
    _, _, entries = _c_list(nvml, "nvmlDeviceGetComputeRunningProcesses_v3", _Entry24, 8)
    assert [e.pid for e in entries[:2]] == [PID, PID + 1]


@pytest.mark.parametrize(
    ("version", "has_clock_events"),
    [("530.30.02", False), ("535.104.05", True), ("530.41.03", False), (None, True)],
)
def test_each_simulated_driver_answers_by_its_own_branch(
    version: str | None, has_clock_events: bool
) -> None:
    """The branch of a version is parsed once and kept: drivers of other branches made in
    the same process, before and after, still answer by their own (no version: newest)."""
    nvml = make_nvml(GPU, driver_version=version)

    def call() -> int:
        return int(nvml.nvmlDeviceGetCurrentClocksEventReasons(first_handle(nvml)))

    if has_clock_events:
        assert call() >= 0
    else:
        assert _error_code(call) == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
