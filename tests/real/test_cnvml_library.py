"""The C NVML itself, asked through the real nvidia-ml-py: the instrument is what it claims.

Each generation's library is loaded by the real binding (the virtualenv's newest and the
oldest pyproject.toml allows) in a subprocess; ``cnvml/probe.py`` reports what the binding
sees. These tests do not run gputop: they check the imitation the end-to-end tests in
``test_real_binding.py`` rely on (docs/c-nvml.md).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cnvml.build import GENERATIONS
from cnvml.fixtures import BINDINGS, NEWEST, OLDEST, CNvml
from helpers import TESTS

MIB = 1024 * 1024
PROBE = TESTS / "cnvml" / "probe.py"
GENERATION_NAMES = [g.name for g in GENERATIONS]

EXPORTED = {
    "R460": {"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"},
    "R470": {
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetGraphicsRunningProcesses_v2",
        "nvmlDeviceGetMPSComputeRunningProcesses",
        "nvmlDeviceGetMPSComputeRunningProcesses_v2",
    },
    "R535.54": {
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetConfComputeMemSizeInfo",
    },
    "R550": {
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetConfComputeMemSizeInfo",
        "nvmlDeviceGetRunningProcessDetailList",
        "nvmlDeviceGetMPSComputeRunningProcesses_v3",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetFieldValues",
    },
}
NOT_EXPORTED = {
    "R460": {
        "nvmlDeviceGetMPSComputeRunningProcesses",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetConfComputeMemSizeInfo",
    },
    "R470": {
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetConfComputeMemSizeInfo",
    },
    "R535.54": {"nvmlDeviceGetTemperatureV", "nvmlDeviceGetRunningProcessDetailList"},
    "R550": set(),
}
ENTRY_BYTES = {
    "R460": {"nvmlDeviceGetComputeRunningProcesses": 16},
    "R470": {"nvmlDeviceGetComputeRunningProcesses_v2": 24},
    "R535.54": {"nvmlDeviceGetComputeRunningProcesses_v3": 32},
    "R550": {"nvmlDeviceGetComputeRunningProcesses_v3": 24},
}


def probe_scenario(pids: list[int]) -> dict[str, Any]:
    """A refused GPU, a working one with a busy and an idle process, a lost one, and one
    whose processes have no SM readings and whose serial fails."""
    busy, idle = pids[0], pids[1]
    return {
        "description": "C NVML probe",
        "function_errors": {"nvmlSystemGetCudaDriverVersion_v2": "LIBRARY_NOT_FOUND"},
        "gpus": [
            {
                "name": "NVIDIA A100-SXM4-80GB",
                "uuid": "GPU-0a0a0a0a-0000-4000-8000-000000000000",
                "memory_total_mib": 81920,
                "no_permission": ["nvmlDeviceGetHandleByIndex"],
            },
            {
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": "GPU-1b1b1b1b-1111-4111-8111-111111111111",
                "pci_bus_id": "00000000:1B:00.0",
                "memory_total_mib": 81559,
                "memory_reserved_mib": 529,
                "memory_used_mib": 30000,
                "temperature_c": 41,
                "processes": [
                    {"pid": busy, "used_memory_mib": 20000, "sm_util": 70},
                    {"pid": idle, "used_memory_mib": 9000, "sm_util": 0},
                ],
            },
            {
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": "GPU-2c2c2c2c-2222-4222-8222-222222222222",
                "memory_total_mib": 81559,
                "lost_after_s": 0,
            },
            {
                "name": "Tesla T4",
                "uuid": "GPU-3d3d3d3d-3333-4333-8333-333333333333",
                "memory_total_mib": 15360,
                "serial": "1320000000001",
                "function_errors": {"nvmlDeviceGetSerial": "UNKNOWN"},
                "processes": [{"pid": pids[2], "used_memory_mib": 100}],
            },
        ],
    }


_reports: dict[tuple[str, str], dict[str, Any]] = {}


def probe(c_nvml: CNvml, pids: list[int], generation: str, binding: str) -> dict[str, Any]:
    """The probe's report for one generation and binding, run once per session."""
    key = (generation, binding)
    if key not in _reports:
        data = c_nvml.data_file("probe", probe_scenario(pids), generation)
        result = c_nvml.run([str(PROBE)], generation=generation, binding=binding, data=data)
        assert result.returncode == 0, result.stderr
        _reports[key] = json.loads(result.stdout)
    return _reports[key]


@pytest.mark.parametrize("binding", BINDINGS)
def test_the_real_binding_loads_the_library_and_reads_name_uuid_and_memory(
    c_nvml: CNvml,
    sleepers: list[int],
    binding: str,
) -> None:
    report = probe(c_nvml, sleepers, "R550", binding)
    gpu = report["gpus"][1]
    assert report["driver_version"] == {"value": "550.127.05"}
    assert gpu["name"] == {"value": "NVIDIA H100 80GB HBM3"}
    assert gpu["uuid"] == {"value": "GPU-1b1b1b1b-1111-4111-8111-111111111111"}
    assert gpu["memory_v1"]["value"]["total"] == 81559 * MIB


def test_the_oldest_binding_is_the_floor_pyproject_declares(
    c_nvml: CNvml,
    sleepers: list[int],
) -> None:
    from cnvml.build import declared_binding_floor

    oldest = probe(c_nvml, sleepers, "R550", OLDEST)
    newest = probe(c_nvml, sleepers, "R550", NEWEST)
    assert oldest["binding"].startswith(declared_binding_floor())
    assert oldest["binding_file"] != newest["binding_file"]


@pytest.mark.parametrize("generation", GENERATION_NAMES)
def test_each_generation_exports_its_calls_and_lacks_the_later_ones(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
) -> None:
    symbols = probe(c_nvml, sleepers, generation, NEWEST)["symbols"]
    assert {name for name in EXPORTED[generation] if not symbols[name]} == set()
    assert {name for name in NOT_EXPORTED[generation] if symbols[name]} == set()


@pytest.mark.parametrize("generation", GENERATION_NAMES)
def test_each_generation_writes_process_entries_of_its_own_size(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
) -> None:
    sizes = probe(c_nvml, sleepers, generation, NEWEST)["gpus"][1]["entry_sizes"]
    for call, entry_bytes in ENTRY_BYTES[generation].items():
        assert sizes[call]["value"]["entries"] == 2
        assert sizes[call]["value"]["bytes"] == 2 * entry_bytes


def test_the_r550_detail_list_reports_the_same_compute_processes(
    c_nvml: CNvml,
    sleepers: list[int],
) -> None:
    gpu = probe(c_nvml, sleepers, "R550", NEWEST)["gpus"][1]
    assert gpu["detail_list"] == {"value": [[sleepers[0], 20000 * MIB], [sleepers[1], 9000 * MIB]]}


def test_memory_v1_used_includes_reserved_and_v2_reports_it_apart(
    c_nvml: CNvml,
    sleepers: list[int],
) -> None:
    gpu = probe(c_nvml, sleepers, "R550", NEWEST)["gpus"][1]
    assert gpu["memory_v1"]["value"]["used"] == (30000 + 529) * MIB
    v2 = gpu["memory_v2"]["value"]
    assert (v2["used"], v2["reserved"]) == (30000 * MIB, 529 * MIB)
    assert v2["free"] == gpu["memory_v1"]["value"]["free"] == (81559 - 30000 - 529) * MIB


def test_a_reading_the_scenario_leaves_out_is_not_supported(
    c_nvml: CNvml,
    sleepers: list[int],
) -> None:
    gpu = probe(c_nvml, sleepers, "R550", NEWEST)["gpus"][1]
    assert gpu["fan"] == {"error": "NVMLError_NotSupported"}
    assert gpu["temperature"] == {"value": 41}


def test_process_samples_cover_only_processes_active_in_the_period(
    c_nvml: CNvml,
    sleepers: list[int],
) -> None:
    gpu = probe(c_nvml, sleepers, "R550", NEWEST)["gpus"][1]
    assert gpu["process_utilization"] == {"value": [[sleepers[0], 70]]}


def test_process_samples_are_not_found_when_none_is_newer_than_last_seen(
    c_nvml: CNvml,
    sleepers: list[int],
) -> None:
    gpu = probe(c_nvml, sleepers, "R550", NEWEST)["gpus"][1]
    assert gpu["process_utilization_since_now"] == {"error": "NVMLError_NotFound"}


def test_a_gpu_whose_processes_have_no_sm_readings_does_not_sample_processes(
    c_nvml: CNvml,
    sleepers: list[int],
) -> None:
    gpu = probe(c_nvml, sleepers, "R550", NEWEST)["gpus"][3]
    assert gpu["process_utilization"] == {"error": "NVMLError_NotSupported"}


def test_a_function_error_in_the_scenario_is_what_the_call_returns(
    c_nvml: CNvml,
    sleepers: list[int],
) -> None:
    report = probe(c_nvml, sleepers, "R550", NEWEST)
    assert report["gpus"][3]["serial"] == {"error": "NVMLError_Unknown"}
    assert report["gpus"][1]["serial"] == {"error": "NVMLError_NotSupported"}


def test_the_refused_gpu_is_counted_but_its_handle_is_no_permission(
    c_nvml: CNvml,
    sleepers: list[int],
) -> None:
    report = probe(c_nvml, sleepers, "R550", NEWEST)
    assert report["count"] == {"value": 4}
    assert report["gpus"][0]["handle"] == "NVMLError_NoPermission"


def test_a_lost_gpu_answers_gpu_is_lost(
    c_nvml: CNvml,
    sleepers: list[int],
) -> None:
    gpu = probe(c_nvml, sleepers, "R550", NEWEST)["gpus"][2]
    assert gpu["handle"] == "ok"
    assert gpu["name"] == {"error": "NVMLError_GpuIsLost"}


@pytest.mark.parametrize("generation", GENERATION_NAMES)
def test_without_libcuda_cuda_version_v2_fails_and_v1_answers(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
) -> None:
    report = probe(c_nvml, sleepers, generation, NEWEST)
    assert report["cuda_v2"] == {"error": "NVMLError_LibraryNotFound"}
    assert report["cuda_v1"] == {"value": c_nvml.generation(generation).cuda_driver_version}
