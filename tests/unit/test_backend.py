"""The NVML backend, run on simulated GPUs through the very same code as on a real driver."""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable

from helpers.scenarios import minimal_gpu

from gputop.core.model import ProcessOrigin, ProcessType
from gputop.core.sampling.nvml_backend import NvmlBackend

MIB = 1024 * 1024
UNUSED_PID = 4_194_303

OpenFake = Callable[..., NvmlBackend]
WriteScenario = Callable[..., str]


def test_v100x4_shows_four_cards_with_their_memory(fake_backend: OpenFake) -> None:
    snapshot = fake_backend("v100x4").sample()
    assert [gpu.name for gpu in snapshot.gpus] == ["Tesla V100-SXM2-16GB"] * 4
    assert [gpu.physical_index for gpu in snapshot.gpus] == [0, 1, 2, 3]
    assert [gpu.memory_used_bytes // MIB for gpu in snapshot.gpus] == [8124, 4252, 11, 1582]
    assert snapshot.driver_version == "418.67"
    assert snapshot.cuda_driver_version == 10010
    assert snapshot.cuda_driver_version_text == "10.1"


def test_v100x4_has_both_processes_on_gpu_0(fake_backend: OpenFake) -> None:
    gpu0 = fake_backend("v100x4").sample().gpus[0]
    by_pid = {p.pid: p for p in gpu0.processes}
    assert by_pid[4202277].used_memory_bytes == 3289 * MIB
    assert by_pid[4327232].used_memory_bytes == 1389 * MIB
    assert {p.type for p in gpu0.processes} == {ProcessType.COMPUTE}
    assert all(p.physical_index == 0 for p in gpu0.processes)


def test_a_board_without_a_fan_shows_no_fan_and_everything_else(fake_backend: OpenFake) -> None:
    gpu = fake_backend("v100x4").sample().gpus[1]
    assert gpu.fan_percent is None
    assert gpu.temperature_c is not None
    assert gpu.power_w is not None
    assert gpu.utilization_gpu_percent is not None


def test_every_reading_reaches_the_sample_in_its_unit(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    gpu = fake_backend(scenario_file([minimal_gpu()])).sample().gpus[0]
    assert gpu.uuid == "GPU-11111111-aaaa-bbbb-cccc-000000000000"
    assert gpu.short_uuid == "GPU-11111111"
    assert gpu.pci_bus_id == "00000000:07:00.0"
    assert gpu.memory_total_bytes == 40960 * MIB
    assert gpu.memory_used_bytes == 1024 * MIB
    assert gpu.memory_free_bytes == (40960 - 1024) * MIB
    assert (gpu.utilization_gpu_percent, gpu.utilization_memory_percent) == (50, 20)
    assert (gpu.temperature_c, gpu.fan_percent) == (40, 30)
    assert (gpu.power_w, gpu.power_limit_w) == (100.0, 400.0)
    assert (gpu.clocks.sm_mhz, gpu.clocks.memory_mhz) == (1410, 1215)
    assert gpu.max_clocks.graphics_mhz == 1410
    assert gpu.compute_capability == (8, 0)
    assert gpu.performance_state == 0
    assert gpu.lost is False


def test_an_absent_field_is_none_and_only_that_field(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    gpu = minimal_gpu()
    del gpu["temperature_c"]
    sample = fake_backend(scenario_file([gpu])).sample().gpus[0]
    assert sample.temperature_c is None
    assert sample.power_w == 100.0
    assert sample.fan_percent == 30


def test_no_permission_makes_that_field_unavailable(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    gpu = minimal_gpu(no_permission=["nvmlDeviceGetPowerUsage"])
    sample = fake_backend(scenario_file([gpu])).sample().gpus[0]
    assert sample.power_w is None
    assert sample.power_limit_w == 400.0


def test_a_process_list_nvml_refuses_is_unknown_not_empty(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    refused = [
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses",
        "nvmlDeviceGetGraphicsRunningProcesses_v2",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
    ]
    process = {"pid": UNUSED_PID, "used_memory_mib": 10, "type": "C"}
    gpus = [
        minimal_gpu(no_permission=refused, processes=[process]),
        minimal_gpu(uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000", pci_bus_id="00000000:08:00.0"),
    ]
    snapshot = fake_backend(scenario_file(gpus)).sample()
    assert snapshot.gpus[0].processes == ()
    assert snapshot.gpus[0].processes_listed is False
    assert snapshot.gpus[1].processes_listed is True


def test_an_old_driver_falls_back_to_older_process_calls(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    process = {"pid": UNUSED_PID, "used_memory_mib": 10, "type": "C"}
    path = scenario_file(
        [minimal_gpu(processes=[process])],
        missing_functions=[
            "nvmlDeviceGetComputeRunningProcesses_v3",
            "nvmlDeviceGetGraphicsRunningProcesses_v3",
        ],
    )
    gpu = fake_backend(path).sample().gpus[0]
    assert [p.pid for p in gpu.processes] == [UNUSED_PID]


def test_a_missing_function_is_na_and_asked_only_once(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    path = scenario_file([minimal_gpu()], missing_functions=["nvmlDeviceGetPowerUsage"])
    backend = fake_backend(path)
    first, second = backend.sample(), backend.sample()
    assert first.gpus[0].power_w is None and second.gpus[0].power_w is None
    assert backend._reader.has("nvmlDeviceGetPowerUsage") is False


def test_a_gpu_lost_at_start_is_marked_lost_and_the_others_are_read(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    lost = minimal_gpu(lost_after_s=0)
    healthy = minimal_gpu(
        uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000", pci_bus_id="00000000:08:00.0"
    )
    snapshot = fake_backend(scenario_file([lost, healthy]), at_s=10).sample()
    assert snapshot.gpus[0].lost is True
    assert snapshot.gpus[1].lost is False
    assert snapshot.gpus[1].temperature_c == 40


def test_a_gpu_lost_while_running_keeps_its_identity(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    backend = fake_backend(scenario_file([minimal_gpu(lost_after_s=5)]), at_s=1)
    before = backend.sample().gpus[0]
    backend._nvml.set_time(10)
    after = backend.sample().gpus[0]
    assert before.lost is False
    assert after.lost is True
    assert after.uuid == before.uuid and after.name == before.name
    assert after.temperature_c is None


def test_a_pid_from_another_namespace_gets_a_hint(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    process = {"pid": UNUSED_PID, "used_memory_mib": 10, "type": "C"}
    gpu = fake_backend(scenario_file([minimal_gpu(processes=[process])])).sample().gpus[0]
    (foreign,) = gpu.processes
    assert foreign.origin is ProcessOrigin.FOREIGN
    assert foreign.user is None
    assert "PID namespace" in (foreign.hint or "")


def test_a_simulated_pid_shows_the_scenario_user_and_command(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    process = {
        "pid": UNUSED_PID,
        "used_memory_mib": 10,
        "type": "C",
        "user": "alice",
        "cmd": ["python", "train.py", "--lr", "3e-4"],
    }
    gpu = fake_backend(scenario_file([minimal_gpu(processes=[process])])).sample().gpus[0]
    (simulated,) = gpu.processes
    assert simulated.origin is ProcessOrigin.SIMULATED
    assert simulated.user == "alice"
    assert simulated.command == ("python", "train.py", "--lr", "3e-4")


def test_a_live_host_pid_shows_the_hosts_facts(
    fake_backend: OpenFake, scenario_file: WriteScenario, host_pid_namespace: None
) -> None:
    process = {
        "pid": os.getpid(),
        "used_memory_mib": 10,
        "type": "C",
        "user": "alice",
        "cmd": ["python", "train.py"],
    }
    gpu = fake_backend(scenario_file([minimal_gpu(processes=[process])])).sample().gpus[0]
    (live,) = gpu.processes
    assert live.origin is ProcessOrigin.HOST
    assert live.user == getpass.getuser()
    assert live.host_memory_bytes is not None


def test_unknown_process_memory_is_none(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    process = {"pid": UNUSED_PID, "used_memory_mib": None, "type": "C"}
    gpu = fake_backend(scenario_file([minimal_gpu(processes=[process])])).sample().gpus[0]
    assert gpu.processes[0].used_memory_bytes is None


def test_a_process_in_both_lists_is_compute_and_graphics(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    process = {"pid": UNUSED_PID, "used_memory_mib": 64, "type": "C+G"}
    gpu = fake_backend(scenario_file([minimal_gpu(processes=[process])])).sample().gpus[0]
    (both,) = gpu.processes
    assert both.type is ProcessType.COMPUTE_GRAPHICS
    assert both.used_memory_bytes == 64 * MIB


def test_per_process_sm_utilization_is_read(
    fake_backend: OpenFake, scenario_file: WriteScenario
) -> None:
    process = {"pid": UNUSED_PID, "used_memory_mib": 64, "type": "C", "sm_util": 77, "mem_util": 12}
    busy = minimal_gpu(processes=[process], utilization_gpu=90, utilization_memory=30)
    gpu = fake_backend(scenario_file([busy])).sample().gpus[0]
    assert gpu.processes[0].sm_util_percent == 77
    assert gpu.processes[0].memory_util_percent == 12


def test_mig_devices_and_their_processes_are_listed(fake_backend: OpenFake) -> None:
    snapshot = fake_backend("mig").sample()
    mig_gpu, plain_gpu = snapshot.gpus
    assert mig_gpu.mig_mode_current is True
    assert len(mig_gpu.mig_devices) == 3
    assert all(m.uuid and m.uuid.startswith("MIG-") for m in mig_gpu.mig_devices)
    assert [m.name for m in mig_gpu.mig_devices] == [
        "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
        "NVIDIA A100-SXM4-80GB MIG 2g.20gb",
        "NVIDIA A100-SXM4-80GB MIG 1g.10gb",
    ]
    mig_uuids = {m.uuid for m in mig_gpu.mig_devices}
    assert mig_gpu.processes and all(p.mig_uuid in mig_uuids for p in mig_gpu.processes)
    assert plain_gpu.mig_mode_current is False
    assert plain_gpu.mig_devices == ()
    assert plain_gpu.processes and all(p.mig_uuid is None for p in plain_gpu.processes)


def test_a_frozen_clock_gives_identical_snapshots(fake_backend: OpenFake) -> None:
    first = fake_backend("demo", at_s=12.5).sample()
    second = fake_backend("demo", at_s=12.5).sample()
    assert first == second


def test_readings_move_with_time(fake_backend: OpenFake) -> None:
    early = fake_backend("demo", at_s=3).sample()
    late = fake_backend("demo", at_s=17).sample()
    assert [g.utilization_gpu_percent for g in early.gpus] != [
        g.utilization_gpu_percent for g in late.gpus
    ]


def test_every_builtin_scenario_samples(fake_backend: OpenFake) -> None:
    from gputop.core.fake import BUILTIN_SCENARIOS

    for name in BUILTIN_SCENARIOS:
        snapshot = fake_backend(name).sample()
        assert snapshot.gpus, name
        assert snapshot.simulated, name


def test_dgx_h100_has_eight_cards_and_about_200_processes(fake_backend: OpenFake) -> None:
    snapshot = fake_backend("dgx-h100").sample()
    assert len(snapshot.gpus) == 8
    assert 180 <= sum(len(g.processes) for g in snapshot.gpus) <= 220


def test_faulty_survives_every_fault(fake_backend: OpenFake) -> None:
    snapshot = fake_backend("faulty", at_s=60).sample()
    assert any(gpu.lost for gpu in snapshot.gpus)
    assert any(not gpu.lost for gpu in snapshot.gpus)
    assert any(p.origin is ProcessOrigin.FOREIGN for g in snapshot.gpus for p in g.processes)
