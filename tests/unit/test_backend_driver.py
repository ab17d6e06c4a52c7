"""What real drivers do differently, as the backend must read it (issue 9).

Each test runs the real backend on the simulated driver, which imitates the behaviour in
question (docs/scenario.md); the C NVML end-to-end tests check the same against nvidia-ml-py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pynvml
import pytest
from helpers.scenarios import minimal_gpu

from gputop.core.model import ProcessType
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.nvml_running import (
    COMPUTE,
    GRAPHICS,
    MPS,
    ProcessInfoV1,
    ProcessInfoV2,
    ProcessInfoV3Wide,
)
from gputop.core.snapshot_json import snapshot_to_json

MIB = 1024 * 1024
PID_A, PID_B, PID_C = 4_100_001, 4_100_002, 4_100_003
SECOND = {"uuid": "GPU-22222222-aaaa-bbbb-cccc-000000000000", "pci_bus_id": "00000000:08:00.0"}
PRE_R470_MISSING = [
    f"{base}{suffix}" for base in (COMPUTE, GRAPHICS, MPS) for suffix in ("_v2", "_v3")
] + ["nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetTemperatureV"]

OpenFake = Callable[..., NvmlBackend]
WriteScenario = Callable[..., str]


def _process(pid: int, **fields: Any) -> dict[str, Any]:
    return {"pid": pid, "used_memory_mib": 100, "type": "C", **fields}


def _three_processes() -> list[dict[str, Any]]:
    return [
        _process(PID_A, used_memory_mib=700),
        _process(PID_B, used_memory_mib=300),
        _process(PID_C, used_memory_mib=50),
    ]


# -- memory -------------------------------------------------------------------------------


def test_memory_used_is_v2_used_without_what_the_driver_reserves(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    gpu = minimal_gpu(memory_used_mib=1024, memory_reserved_mib=500)
    sample = fake_backend(scenario_file([gpu])).sample().gpus[0]
    assert sample.memory_used_bytes == 1024 * MIB
    assert sample.memory_reserved_bytes == 500 * MIB
    assert sample.memory_free_bytes == (40960 - 1024 - 500) * MIB


def test_a_driver_without_memory_v2_shows_v1_used_including_reserved(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    gpu = minimal_gpu(memory_used_mib=1024, memory_reserved_mib=500)
    path = scenario_file([gpu], missing_functions=["nvmlDeviceGetMemoryInfo_v2"])
    sample = fake_backend(path).sample().gpus[0]
    assert sample.memory_used_bytes == (1024 + 500) * MIB
    assert sample.memory_reserved_bytes is None


# -- process lists by driver generation ------------------------------------------------------


@pytest.mark.parametrize(
    ("driver_version", "missing", "symbol", "entry"),
    [
        pytest.param("460.106.00", PRE_R470_MISSING, COMPUTE, ProcessInfoV1, id="R460"),
        pytest.param(
            "470.256.02",
            [f"{base}_v3" for base in (COMPUTE, GRAPHICS, MPS)],
            f"{COMPUTE}_v2",
            ProcessInfoV2,
            id="R470",
        ),
        pytest.param("535.54.03", [], f"{COMPUTE}_v3", ProcessInfoV3Wide, id="535.54"),
        pytest.param("535.104.05", [], f"{COMPUTE}_v3", ProcessInfoV2, id="535.104"),
        pytest.param("550.127.05", [], f"{COMPUTE}_v3", ProcessInfoV2, id="R550"),
    ],
)
def test_each_driver_generation_lists_every_process_with_its_memory(
    fake_backend: OpenFake,
    scenario_file: WriteScenario,
    driver_version: str,
    missing: list[str],
    symbol: str,
    entry: type,
) -> None:
    path = scenario_file(
        [minimal_gpu(processes=_three_processes())],
        driver_version=driver_version,
        missing_functions=missing,
    )
    backend = fake_backend(path)
    gpu = backend.sample().gpus[0]
    chosen = backend.process_lister.call_for(COMPUTE)
    assert chosen is not None and (chosen.symbol, chosen.entry) == (symbol, entry)
    assert {p.pid: p.used_memory_bytes for p in gpu.processes} == {
        PID_A: 700 * MIB,
        PID_B: 300 * MIB,
        PID_C: 50 * MIB,
    }
    assert gpu.processes_dropped == 0


def test_more_processes_than_the_first_guess_are_all_listed(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    many = [_process(4_000_000 + i, used_memory_mib=i + 1) for i in range(40)]
    gpu = fake_backend(scenario_file([minimal_gpu(processes=many)])).sample().gpus[0]
    assert len(gpu.processes) == 40


def test_impossible_pids_are_dropped_and_counted(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    processes = [_process(0), _process(2**31), _process(2**32 - 1), _process(PID_A)]
    gpu = fake_backend(scenario_file([minimal_gpu(processes=processes)])).sample().gpus[0]
    assert [p.pid for p in gpu.processes] == [PID_A]
    assert gpu.processes_dropped == 3


def test_dropped_pids_are_shown_in_the_json_snapshot(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    processes = [_process(0), _process(PID_A)]
    snapshot = fake_backend(scenario_file([minimal_gpu(processes=processes)])).sample()
    assert snapshot_to_json(snapshot)["gpus"][0]["processes_dropped"] == 1


def test_an_mps_client_is_listed_as_one(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    processes = [_process(PID_A, type="C"), _process(PID_B, type="M+C")]
    gpu = fake_backend(scenario_file([minimal_gpu(processes=processes)])).sample().gpus[0]
    assert {p.pid: p.type for p in gpu.processes} == {
        PID_A: ProcessType.COMPUTE,
        PID_B: ProcessType.MPS_CLIENT,
    }


def test_mps_clients_are_listed_on_a_driver_with_only_the_v1_mps_call(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    path = scenario_file(
        [minimal_gpu(processes=[_process(PID_B, type="M+C")])],
        driver_version="460.106.00",
        missing_functions=PRE_R470_MISSING,
    )
    gpu = fake_backend(path).sample().gpus[0]
    assert [(p.pid, p.used_memory_bytes) for p in gpu.processes] == [(PID_B, 100 * MIB)]


# -- per-process utilisation --------------------------------------------------------------------


def test_an_idle_process_reads_zero_sm(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    processes = [_process(PID_A, sm_util=60), _process(PID_B, sm_util=0)]
    card = minimal_gpu(processes=processes, utilization_gpu=70)
    gpu = fake_backend(scenario_file([card])).sample().gpus[0]
    assert {p.pid: p.sm_util_percent for p in gpu.processes} == {PID_A: 60, PID_B: 0}


def test_a_process_that_goes_idle_reads_zero_not_its_last_value(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    # 50 % at t=5, clamped to 0 at t=15 (a sine of period 20 s).
    waves = {"base": 0, "amp": 50, "period": 20, "min": 0}
    processes = [_process(PID_A, sm_util=waves), _process(PID_B, sm_util=10)]
    card = minimal_gpu(processes=processes, utilization_gpu=70)
    backend = fake_backend(scenario_file([card]), at_s=5)
    busy = {p.pid: p.sm_util_percent for p in backend.sample().gpus[0].processes}
    backend.nvml.set_time(15)
    idle = {p.pid: p.sm_util_percent for p in backend.sample().gpus[0].processes}
    assert busy[PID_A] == 50
    assert idle[PID_A] == 0


def test_when_no_process_ran_every_process_reads_zero(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    processes = [_process(PID_A, sm_util=0), _process(PID_B, sm_util=0)]
    gpu = fake_backend(scenario_file([minimal_gpu(processes=processes)])).sample().gpus[0]
    assert [p.sm_util_percent for p in gpu.processes] == [0, 0]


def test_a_gpu_that_does_not_measure_processes_shows_their_sm_as_unknown(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    gpu = minimal_gpu(processes=[_process(PID_A)])
    sample = fake_backend(scenario_file([gpu])).sample().gpus[0]
    assert sample.processes[0].sm_util_percent is None


# -- system and device readings ------------------------------------------------------------------


def test_the_cuda_driver_version_survives_a_container_without_libcuda(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    path = scenario_file(
        [minimal_gpu()],
        function_errors={"nvmlSystemGetCudaDriverVersion_v2": "LIBRARY_NOT_FOUND"},
    )
    assert fake_backend(path).sample().cuda_driver_version == 12040


def test_temperature_is_read_through_temperature_v_first(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    gpu = minimal_gpu(function_errors={"nvmlDeviceGetTemperature": "NOT_SUPPORTED"})
    assert fake_backend(scenario_file([gpu])).sample().gpus[0].temperature_c == 40


def test_temperature_falls_back_to_the_old_call_on_drivers_without_temperature_v(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    path = scenario_file([minimal_gpu()], missing_functions=["nvmlDeviceGetTemperatureV"])
    assert fake_backend(path).sample().gpus[0].temperature_c == 40


def test_the_nvlink_count_comes_from_the_driver_with_no_fixed_maximum(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    gpu = minimal_gpu(nvlink_count=36)
    assert fake_backend(scenario_file([gpu])).sample().gpus[0].nvlink_count == 36


def test_a_board_without_nvlink_has_no_link_count(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    assert fake_backend(scenario_file([minimal_gpu()])).sample().gpus[0].nvlink_count is None


def test_a_fan_above_its_rated_speed_reads_above_100(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    gpu = minimal_gpu(fan_percent=115)
    assert fake_backend(scenario_file([gpu])).sample().gpus[0].fan_percent == 115


def test_performance_state_32_is_unknown(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    gpu = minimal_gpu(performance_state=32)
    assert fake_backend(scenario_file([gpu])).sample().gpus[0].performance_state is None


def test_a_whole_gpu_has_no_sm_count_from_nvml_and_a_mig_device_has_its_own(
    fake_backend: OpenFake,
) -> None:
    backend = fake_backend("mig")
    nvml = backend.nvml
    with pytest.raises(pynvml.NVMLError):  # NVML: MIG devices only, as real drivers answer
        nvml.nvmlDeviceGetAttributes_v2(nvml.nvmlDeviceGetHandleByIndex(0))
    mig_gpu = backend.sample().gpus[0]
    # The whole GPU's count is what CUDA gives (cuDeviceGetAttribute): here the simulated
    # CUDA's, the scenario's; on real GPUs the driver probe's, or none.
    assert mig_gpu.multiprocessor_count == nvml.simulated_sm_count(0)
    assert all(m.multiprocessor_count for m in mig_gpu.mig_devices)


# -- a GPU NVML refuses ----------------------------------------------------------------------------


def test_a_gpu_whose_handle_is_refused_is_no_access_not_lost(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    refused = minimal_gpu(no_permission=["nvmlDeviceGetHandleByIndex"])
    snapshot = fake_backend(scenario_file([refused, minimal_gpu(**SECOND)])).sample()
    first, second = snapshot.gpus
    assert (first.no_access, first.lost) == (True, False)
    assert first.processes_listed is False
    assert (second.no_access, second.temperature_c) == (False, 40)


# -- containment -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(OverflowError("int too large to convert"), id="overflow"),
        pytest.param(TypeError("odd value"), id="type"),
        pytest.param(getattr(pynvml, "NVMLLibraryMismatchError", RuntimeError)(), id="mismatch"),
    ],
)
def test_any_exception_from_one_field_makes_only_that_field_na(
    fake_backend: OpenFake,
    scenario_file: WriteScenario,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
) -> None:
    backend = fake_backend(scenario_file([minimal_gpu()]))

    def broken(*_args: Any) -> int:
        raise error

    monkeypatch.setattr(backend.nvml, "nvmlDeviceGetPowerUsage", broken, raising=False)
    gpu = backend.sample().gpus[0]
    assert gpu.power_w is None
    assert (gpu.temperature_c, gpu.power_limit_w) == (40, 400.0)


def test_a_binding_that_raises_library_mismatch_is_treated_as_a_missing_function(
    fake_backend: OpenFake, scenario_file: WriteScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    mismatch = getattr(pynvml, "NVMLLibraryMismatchError", None)
    if mismatch is None:
        pytest.skip("this nvidia-ml-py predates NVMLLibraryMismatchError (added in 12.550)")
    backend = fake_backend(scenario_file([minimal_gpu()]))

    def too_old(*_args: Any) -> int:
        raise mismatch("driver too old")

    monkeypatch.setattr(backend.nvml, "nvmlDeviceGetPowerUsage", too_old, raising=False)
    backend.sample()
    assert backend.reader.has("nvmlDeviceGetPowerUsage") is False


def test_an_odd_value_from_the_driver_makes_only_that_field_na(
    fake_backend: OpenFake, scenario_file: WriteScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = fake_backend(scenario_file([minimal_gpu()]))
    monkeypatch.setattr(backend.nvml, "nvmlDeviceGetFanSpeed", lambda _h: "fast", raising=False)
    gpu = backend.sample().gpus[0]
    assert gpu.fan_percent is None
    assert gpu.temperature_c == 40


def test_an_exception_while_sampling_one_gpu_marks_that_gpu_and_reads_the_others(
    fake_backend: OpenFake, scenario_file: WriteScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = fake_backend(scenario_file([minimal_gpu(), minimal_gpu(**SECOND)]))
    real_mig_mode = backend.nvml.nvmlDeviceGetMigMode

    def mig_mode(handle: Any) -> Any:
        # Not a pair: indexing it raises outside any single field's read.
        return 7 if handle.gpu == 0 else real_mig_mode(handle)

    monkeypatch.setattr(backend.nvml, "nvmlDeviceGetMigMode", mig_mode, raising=False)
    first, second = backend.sample().gpus
    assert first.sample_error is not None and "TypeError" in first.sample_error
    assert first.uuid == "GPU-11111111-aaaa-bbbb-cccc-000000000000"
    assert (second.sample_error, second.temperature_c) == (None, 40)
