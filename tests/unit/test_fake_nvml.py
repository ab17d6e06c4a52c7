"""The simulated NVML module: pynvml's shapes, units and errors, driven by a scenario."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pynvml
import pytest
from helpers.fake_nvml import (
    BARE_GPU,
    FULL_GPU,
    MIB,
    MIG_GPU,
    MIG_UUIDS,
    SECOND_GPU,
    UUID_0,
    UUID_1,
    first_handle,
    make_nvml,
)

from gputop.core.fake import FakeNvml
from gputop.core.fake.nvml import FakeDeviceHandle
from gputop.core.fake.scenario import parse_scenario

# -- the module itself ---------------------------------------------------------------------


def test_constants_structs_and_errors_are_pynvmls_own() -> None:
    nvml = make_nvml(init=False)
    assert nvml.NVMLError is pynvml.NVMLError
    assert nvml.NVMLError_NotSupported is pynvml.NVMLError_NotSupported
    assert nvml.NVML_TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU
    assert nvml.c_nvmlMemory_t is pynvml.c_nvmlMemory_t
    assert nvml.nvmlStructToFriendlyObject is pynvml.nvmlStructToFriendlyObject


@pytest.mark.parametrize("name", ["nvmlDeviceGetPowerState", "nvmlDeviceGetNoSuchThing"])
def test_an_unsimulated_nvml_function_is_function_not_found(name: str) -> None:
    nvml = make_nvml()
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        getattr(nvml, name)(first_handle(nvml))


def test_a_name_that_is_not_nvmls_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = make_nvml().not_a_thing


@pytest.mark.parametrize(
    "call",
    [
        lambda nvml: nvml.nvmlDeviceGetCount(),
        lambda nvml: nvml.nvmlSystemGetDriverVersion(),
        lambda nvml: nvml.nvmlDeviceGetHandleByIndex(0),
        lambda nvml: nvml.nvmlDeviceGetName(FakeDeviceHandle(0)),
        lambda nvml: nvml.nvmlShutdown(),
    ],
    ids=["count", "driver", "handle", "name", "shutdown"],
)
def test_calls_before_init_are_uninitialized(call: Callable[[FakeNvml], Any]) -> None:
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        call(make_nvml(init=False))


def test_init_is_counted_so_the_last_shutdown_ends_the_session() -> None:
    nvml = make_nvml(init=False)
    nvml.nvmlInit()
    nvml.nvmlInitWithFlags(0)
    nvml.nvmlShutdown()
    assert nvml.nvmlDeviceGetCount() == 1
    nvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()


def test_system_versions_come_from_the_scenario() -> None:
    nvml = make_nvml()
    assert nvml.nvmlSystemGetDriverVersion() == "550.127.05"
    assert nvml.nvmlSystemGetNVMLVersion() == "12.550.127.05"
    assert nvml.nvmlSystemGetCudaDriverVersion() == 12040
    assert nvml.nvmlSystemGetCudaDriverVersion_v2() == 12040


def test_absent_system_versions_are_not_supported() -> None:
    nvml = FakeNvml(parse_scenario({"gpus": [BARE_GPU]}, "test.json"), 0.0)
    nvml.nvmlInit()
    for call in (nvml.nvmlSystemGetDriverVersion, nvml.nvmlSystemGetCudaDriverVersion):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            call()


# -- every field, in NVML's units ------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        pytest.param(lambda n, h: n.nvmlDeviceGetIndex(h), 0, id="index"),
        pytest.param(lambda n, h: n.nvmlDeviceGetName(h), "NVIDIA A100-SXM4-80GB", id="name"),
        pytest.param(lambda n, h: n.nvmlDeviceGetUUID(h), UUID_0, id="uuid"),
        pytest.param(lambda n, h: n.nvmlDeviceGetSerial(h), "1320000000001", id="serial"),
        pytest.param(lambda n, h: n.nvmlDeviceGetMemoryInfo(h).total, 81920 * MIB, id="mem-total"),
        pytest.param(lambda n, h: n.nvmlDeviceGetMemoryInfo(h).used, 1000 * MIB, id="mem-used"),
        pytest.param(lambda n, h: n.nvmlDeviceGetMemoryInfo(h).free, 80920 * MIB, id="mem-free"),
        pytest.param(lambda n, h: n.nvmlDeviceGetUtilizationRates(h).gpu, 77, id="util-gpu"),
        pytest.param(lambda n, h: n.nvmlDeviceGetUtilizationRates(h).memory, 33, id="util-mem"),
        pytest.param(
            lambda n, h: n.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU), 61, id="temp"
        ),
        pytest.param(lambda n, h: n.nvmlDeviceGetFanSpeed(h), 45, id="fan"),
        pytest.param(lambda n, h: n.nvmlDeviceGetPowerUsage(h), 250_500, id="power-mw"),
        pytest.param(lambda n, h: n.nvmlDeviceGetEnforcedPowerLimit(h), 400_000, id="limit-mw"),
        pytest.param(
            lambda n, h: n.nvmlDeviceGetPowerManagementLimit(h), 400_000, id="mgmt-limit-mw"
        ),
        pytest.param(
            lambda n, h: [n.nvmlDeviceGetClockInfo(h, c) for c in range(4)],
            [1300, 1305, 1593, 1100],
            id="clocks",
        ),
        pytest.param(
            lambda n, h: [
                n.nvmlDeviceGetMaxClockInfo(h, c)
                for c in (
                    pynvml.NVML_CLOCK_GRAPHICS,
                    pynvml.NVML_CLOCK_SM,
                    pynvml.NVML_CLOCK_MEM,
                    pynvml.NVML_CLOCK_VIDEO,
                )
            ],
            [1410, 1411, 1593, 1275],
            id="max-clocks",
        ),
        pytest.param(lambda n, h: n.nvmlDeviceGetPerformanceState(h), 2, id="pstate"),
        pytest.param(lambda n, h: n.nvmlDeviceGetPersistenceMode(h), 1, id="persistence"),
        pytest.param(lambda n, h: n.nvmlDeviceGetDisplayActive(h), 0, id="display"),
        pytest.param(lambda n, h: n.nvmlDeviceGetComputeMode(h), 3, id="compute-mode"),
        pytest.param(lambda n, h: n.nvmlDeviceGetCudaComputeCapability(h), (8, 0), id="cc"),
        pytest.param(
            lambda n, h: n.nvmlDeviceGetTotalEccErrors(
                h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
            ),
            4,
            id="ecc-uncorrected",
        ),
        pytest.param(
            lambda n, h: n.nvmlDeviceGetTotalEccErrors(
                h, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC
            ),
            0,
            id="ecc-corrected",
        ),
        pytest.param(
            lambda n, h: n.nvmlDeviceGetBAR1MemoryInfo(h).bar1Total, 131072 * MIB, id="bar1-total"
        ),
        pytest.param(
            lambda n, h: n.nvmlDeviceGetBAR1MemoryInfo(h).bar1Used, 3 * MIB, id="bar1-used"
        ),
        pytest.param(
            lambda n, h: n.nvmlDeviceGetBAR1MemoryInfo(h).bar1Free, 131069 * MIB, id="bar1-free"
        ),
        pytest.param(
            lambda n, h: n.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_TX_BYTES),
            1200,
            id="pcie-tx",
        ),
        pytest.param(
            lambda n, h: n.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_RX_BYTES),
            3400,
            id="pcie-rx",
        ),
        pytest.param(lambda n, h: n.nvmlDeviceGetEncoderUtilization(h)[0], 5, id="encoder"),
        pytest.param(lambda n, h: n.nvmlDeviceGetDecoderUtilization(h)[0], 6, id="decoder"),
        pytest.param(
            lambda n, h: [n.nvmlDeviceGetNvLinkState(h, link) for link in range(12)],
            [pynvml.NVML_FEATURE_ENABLED] * 12,
            id="nvlink-state",
        ),
        pytest.param(
            lambda n, h: [
                v.value.ullVal
                for v in n.nvmlDeviceGetFieldValues(
                    h,
                    [
                        pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
                        pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
                    ],
                )
            ],
            [900, 800],
            id="nvlink-throughput",
        ),
        pytest.param(lambda n, h: n.nvmlDeviceGetMigMode(h), pytest.raises, id="no-mig"),
    ],
)
def test_each_scenario_field_reaches_its_nvml_function_in_nvml_units(
    call: Callable[[FakeNvml, FakeDeviceHandle], Any], expected: Any
) -> None:
    nvml = make_nvml()
    if expected is pytest.raises:
        with pytest.raises(pynvml.NVMLError_NotSupported):
            call(nvml, first_handle(nvml))
    else:
        assert call(nvml, first_handle(nvml)) == expected


def test_pci_info_has_the_bus_id_as_bytes_and_its_parts() -> None:
    nvml = make_nvml()
    handle = first_handle(nvml)
    for info in (nvml.nvmlDeviceGetPciInfo(handle), nvml.nvmlDeviceGetPciInfo_v3(handle)):
        assert info.busId == b"00000000:1B:00.0"
        assert info.busIdLegacy == b"0000:1B:00.0"
        assert (info.domain, info.bus, info.device) == (0, 0x1B, 0)
        assert info.pciDeviceId & 0xFFFF == 0x10DE


def test_memory_info_v2_adds_reserved() -> None:
    nvml = make_nvml()
    memory = nvml.nvmlDeviceGetMemoryInfo(first_handle(nvml), version=pynvml.nvmlMemory_v2)
    assert (memory.version, memory.reserved) == (pynvml.nvmlMemory_v2, 0)
    assert memory.total == memory.used + memory.free == 81920 * MIB


def test_a_percentage_is_an_unsigned_int_even_when_the_signal_overshoots() -> None:
    nvml = make_nvml({**FULL_GPU, "utilization_gpu": 130.4, "fan_percent": -3})
    handle = first_handle(nvml)
    assert nvml.nvmlDeviceGetUtilizationRates(handle).gpu == 100
    assert nvml.nvmlDeviceGetFanSpeed(handle) == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda n, h: n.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_COUNT),
        lambda n, h: n.nvmlDeviceGetClockInfo(h, 7),
        lambda n, h: n.nvmlDeviceGetPcieThroughput(h, 5),
        lambda n, h: n.nvmlDeviceGetNvLinkState(h, 12),
        lambda n, h: n.nvmlDeviceGetTotalEccErrors(h, 9, 0),
    ],
    ids=["sensor", "clock-type", "pcie-counter", "link-beyond-count", "ecc-type"],
)
def test_an_argument_out_of_range_is_invalid_argument(call: Callable[..., Any]) -> None:
    nvml = make_nvml()
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        call(nvml, first_handle(nvml))


def test_an_unknown_field_value_is_not_supported_in_its_return_code() -> None:
    nvml = make_nvml()
    (value,) = nvml.nvmlDeviceGetFieldValues(first_handle(nvml), [pynvml.NVML_FI_DEV_ECC_CURRENT])
    assert value.fieldId == pynvml.NVML_FI_DEV_ECC_CURRENT
    assert value.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED


# -- absent readings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "args"),
    [
        ("nvmlDeviceGetSerial", ()),
        ("nvmlDeviceGetPciInfo", ()),
        ("nvmlDeviceGetMemoryInfo", ()),
        ("nvmlDeviceGetUtilizationRates", ()),
        ("nvmlDeviceGetTemperature", (pynvml.NVML_TEMPERATURE_GPU,)),
        ("nvmlDeviceGetFanSpeed", ()),
        ("nvmlDeviceGetPowerUsage", ()),
        ("nvmlDeviceGetEnforcedPowerLimit", ()),
        ("nvmlDeviceGetPowerManagementLimit", ()),
        ("nvmlDeviceGetClockInfo", (pynvml.NVML_CLOCK_SM,)),
        ("nvmlDeviceGetMaxClockInfo", (pynvml.NVML_CLOCK_MEM,)),
        ("nvmlDeviceGetPerformanceState", ()),
        ("nvmlDeviceGetPersistenceMode", ()),
        ("nvmlDeviceGetDisplayActive", ()),
        ("nvmlDeviceGetComputeMode", ()),
        ("nvmlDeviceGetCudaComputeCapability", ()),
        ("nvmlDeviceGetAttributes_v2", ()),
        ("nvmlDeviceGetMigMode", ()),
        ("nvmlDeviceGetMaxMigDeviceCount", ()),
        ("nvmlDeviceGetTotalEccErrors", (1, 0)),
        ("nvmlDeviceGetBAR1MemoryInfo", ()),
        ("nvmlDeviceGetPcieThroughput", (pynvml.NVML_PCIE_UTIL_TX_BYTES,)),
        ("nvmlDeviceGetEncoderUtilization", ()),
        ("nvmlDeviceGetDecoderUtilization", ()),
        ("nvmlDeviceGetNvLinkState", (0,)),
        ("nvmlDeviceGetProcessUtilization", (0,)),
    ],
)
def test_an_absent_reading_is_pynvmls_not_supported(function: str, args: tuple[Any, ...]) -> None:
    nvml = make_nvml(BARE_GPU)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        getattr(nvml, function)(first_handle(nvml), *args)


def test_a_null_reading_is_not_supported_too() -> None:
    nvml = make_nvml({**FULL_GPU, "fan_percent": None})
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetFanSpeed(first_handle(nvml))


def test_a_bare_gpu_still_lists_no_processes() -> None:
    nvml = make_nvml(BARE_GPU)
    assert nvml.nvmlDeviceGetComputeRunningProcesses(first_handle(nvml)) == []


# -- faults ----------------------------------------------------------------------------------


def test_a_missing_function_is_function_not_found_even_before_init() -> None:
    nvml = make_nvml(init=False, missing_functions=["nvmlSystemGetCudaDriverVersion_v2"])
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlSystemGetCudaDriverVersion_v2()
    nvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlSystemGetCudaDriverVersion_v2()
    assert nvml.nvmlSystemGetCudaDriverVersion() == 12040


def test_no_permission_applies_to_the_listed_functions_on_that_gpu_only() -> None:
    denied = {**FULL_GPU, "no_permission": ["nvmlDeviceGetPowerUsage"]}
    nvml = make_nvml(denied, SECOND_GPU)
    gpu0, gpu1 = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(pynvml.NVMLError_NoPermission):
        nvml.nvmlDeviceGetPowerUsage(gpu0)
    assert nvml.nvmlDeviceGetFanSpeed(gpu0) == 45
    assert nvml.nvmlDeviceGetPowerUsage(gpu1) == 250_500


def test_a_gpu_answers_until_lost_after_s() -> None:
    nvml = make_nvml({**FULL_GPU, "lost_after_s": 5}, at=4.99)
    assert nvml.nvmlDeviceGetTemperature(first_handle(nvml), pynvml.NVML_TEMPERATURE_GPU) == 61


@pytest.mark.parametrize(
    "call",
    [
        lambda n, h: n.nvmlDeviceGetHandleByIndex(0),
        lambda n, h: n.nvmlDeviceGetName(h),
        lambda n, h: n.nvmlDeviceGetFanSpeed(h),
        lambda n, h: n.nvmlDeviceGetComputeRunningProcesses(h),
    ],
    ids=["handle", "name", "fan", "processes"],
)
def test_from_lost_after_s_every_call_on_that_gpu_is_gpu_is_lost(call: Callable[..., Any]) -> None:
    nvml = make_nvml({**FULL_GPU, "lost_after_s": 5}, at=5.0)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        call(nvml, FakeDeviceHandle(0))


def test_a_lost_gpu_still_counts_and_its_neighbours_still_answer() -> None:
    nvml = make_nvml({**FULL_GPU, "lost_after_s": 0}, SECOND_GPU)
    assert nvml.nvmlDeviceGetCount() == 2
    assert nvml.nvmlDeviceGetFanSpeed(nvml.nvmlDeviceGetHandleByIndex(1)) == 45


def test_the_mig_devices_of_a_lost_gpu_are_lost_too() -> None:
    nvml = make_nvml({**MIG_GPU, "lost_after_s": 1})
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetUUID(FakeDeviceHandle(0, 0))


@pytest.mark.parametrize("handle", [FakeDeviceHandle(3), FakeDeviceHandle(0, 0), None, 0])
def test_a_handle_that_names_no_device_is_invalid_argument(handle: Any) -> None:
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        make_nvml().nvmlDeviceGetName(handle)


@pytest.mark.parametrize("index", [-1, 1, 99])
def test_a_bad_index_is_invalid_argument(index: int) -> None:
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        make_nvml().nvmlDeviceGetHandleByIndex(index)


def test_a_handle_can_be_found_by_gpu_or_mig_uuid() -> None:
    nvml = make_nvml(FULL_GPU, MIG_GPU)
    assert nvml.nvmlDeviceGetHandleByUUID(UUID_1) == FakeDeviceHandle(1)
    assert nvml.nvmlDeviceGetHandleByUUID(MIG_UUIDS[1].encode()) == FakeDeviceHandle(1, 1)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000")
