"""gputop's real NVML backend, through the real nvidia-ml-py, on the C NVML (issue 9).

Every test runs ``python -m gputop`` (no ``--fake``) in a subprocess with
``LD_LIBRARY_PATH`` at one driver generation's library, for the newest nvidia-ml-py and the
oldest pyproject.toml allows. The processes are real (``sleep``), so psutil reads live /proc
entries. This is not a run on a real GPU: docs/c-nvml.md says what the library imitates.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from cnvml.build import GENERATIONS
from cnvml.fixtures import BINDINGS, NEWEST, CNvml

MIB = 1024 * 1024
RESERVED_MIB = 529
GENERATION_NAMES = [g.name for g in GENERATIONS]
WITH_MEMORY_V2 = ("R535.54", "R550")
"""Drivers with nvmlDeviceGetMemoryInfo_v2 (R510 and later)."""
REFUSED = 0
"""The physical index of the GPU whose handle NVML refuses (device cgroups)."""


def machine(pids: list[int], *, extra_on_gpu_2: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """A refused GPU first, then two H100s with a busy, an idle and a graphics process;
    ``extra_on_gpu_2`` adds processes to the last GPU."""
    busy, idle, graphics, other = pids[:4]
    h100 = {
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_mib": 81559,
        "memory_reserved_mib": RESERVED_MIB,
        "cuda_compute_capability": [9, 0],
        "utilization_gpu": 75,  # at least what its processes ask for (70 %, 35 %)
        "temperature_c": 45,
        "power_w": 300,
        "power_limit_w": 700,
    }
    return {
        "description": "two H100s and a card this user may not open, in a container",
        "function_errors": {"nvmlSystemGetCudaDriverVersion_v2": "LIBRARY_NOT_FOUND"},
        "gpus": [
            {
                "name": "NVIDIA A100-SXM4-80GB",
                "uuid": "GPU-0a0a0a0a-0000-4000-8000-000000000000",
                "pci_bus_id": "00000000:07:00.0",
                "memory_total_mib": 81920,
                "cuda_compute_capability": [8, 0],
                "no_permission": ["nvmlDeviceGetHandleByIndex"],
            },
            {
                **h100,
                "uuid": "GPU-1b1b1b1b-1111-4111-8111-111111111111",
                "pci_bus_id": "00000000:1B:00.0",
                "memory_used_mib": 30000,
                "performance_state": 0,
                "processes": [
                    {"pid": busy, "used_memory_mib": 20000, "sm_util": 70},
                    {"pid": idle, "used_memory_mib": 9000, "sm_util": 0},
                    {"pid": graphics, "type": "G", "used_memory_mib": 400},
                ],
            },
            {
                **h100,
                "uuid": "GPU-2c2c2c2c-2222-4222-8222-222222222222",
                "pci_bus_id": "00000000:2C:00.0",
                "memory_used_mib": 12500,
                "fan_percent": 120,
                "performance_state": 32,
                "processes": [
                    {"pid": other, "used_memory_mib": 12000, "sm_util": 35},
                    *extra_on_gpu_2,
                ],
            },
        ],
    }


def expected_processes(pids: list[int]) -> dict[int, set[tuple[int, int]]]:
    busy, idle, graphics, other = pids[:4]
    return {
        1: {(busy, 20000 * MIB), (idle, 9000 * MIB), (graphics, 400 * MIB)},
        2: {(other, 12000 * MIB)},
    }


_runs: dict[tuple[str, str, str], subprocess.CompletedProcess[str]] = {}


def run_gputop(
    c_nvml: CNvml, pids: list[int], command: str, generation: str, binding: str
) -> dict[str, Any]:
    """``gputop snapshot --json`` or ``gputop map --json`` on the machine, run once each."""
    key = (command, generation, binding)
    if key not in _runs:
        data = c_nvml.data_file("machine", machine(pids), generation)
        argv = ["snapshot", "--json"] if command == "snapshot" else ["map", "--json", "--no-torch"]
        _runs[key] = c_nvml.run(
            ["-m", "gputop", *argv], generation=generation, binding=binding, data=data
        )
    result = _runs[key]
    assert result.returncode == 0, f"gputop {command} exited {result.returncode}: {result.stderr}"
    document: dict[str, Any] = json.loads(result.stdout)
    return document


combinations = pytest.mark.parametrize(
    ("generation", "binding"),
    [(g, b) for g in GENERATION_NAMES for b in BINDINGS],
)


@combinations
def test_snapshot_lists_exactly_the_scenario_processes_with_their_memory(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
    binding: str,
) -> None:
    snapshot = run_gputop(c_nvml, sleepers, "snapshot", generation, binding)
    listed = {
        gpu["index"]: {(p["pid"], p["used_memory_bytes"]) for p in gpu["processes"] or ()}
        for gpu in snapshot["gpus"]
        if gpu["index"] != REFUSED
    }
    assert listed == expected_processes(sleepers)


@combinations
def test_listed_processes_are_the_live_host_processes(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
    binding: str,
) -> None:
    snapshot = run_gputop(c_nvml, sleepers, "snapshot", generation, binding)
    commands = {p["pid"]: p["command"] for gpu in snapshot["gpus"] for p in gpu["processes"] or ()}
    assert set(commands) == set(sleepers[:4])
    assert all(command == ["sleep", "600"] for command in commands.values())


@combinations
def test_memory_used_is_what_the_driver_calls_used(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
    binding: str,
) -> None:
    """v2 "used" (without driver-reserved memory) where the driver has v2; R460 and R470
    have only v1, whose "used" includes reserved memory, and nvidia-smi shows the same."""
    snapshot = run_gputop(c_nvml, sleepers, "snapshot", generation, binding)
    used = {gpu["index"]: gpu["memory_used_bytes"] for gpu in snapshot["gpus"][1:]}
    reserved = 0 if generation in WITH_MEMORY_V2 else RESERVED_MIB
    assert used == {1: (30000 + reserved) * MIB, 2: (12500 + reserved) * MIB}


@combinations
def test_an_idle_process_reads_0_percent_sm_and_a_busy_one_its_sample(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
    binding: str,
) -> None:
    snapshot = run_gputop(c_nvml, sleepers, "snapshot", generation, binding)
    sm = {p["pid"]: p["sm_util"] for gpu in snapshot["gpus"] for p in gpu["processes"] or ()}
    busy, idle, _, other = sleepers[:4]
    assert (sm.get(busy), sm.get(idle), sm.get(other)) == (70, 0, 35)


@combinations
def test_the_cuda_driver_version_survives_without_libcuda(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
    binding: str,
) -> None:
    snapshot = run_gputop(c_nvml, sleepers, "snapshot", generation, binding)
    assert snapshot["cuda_driver_version"] == c_nvml.generation(generation).cuda_driver_version


@combinations
def test_an_inaccessible_gpu_is_not_cuda_0(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
    binding: str,
) -> None:
    mapping = run_gputop(c_nvml, sleepers, "map", generation, binding)
    physical = [device["physical_index"] for device in mapping["devices"]]
    assert physical and physical[0] != REFUSED
    assert REFUSED not in physical


@combinations
def test_an_inaccessible_gpu_is_not_reported_lost(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
    binding: str,
) -> None:
    snapshot = run_gputop(c_nvml, sleepers, "snapshot", generation, binding)
    refused = snapshot["gpus"][REFUSED]
    assert refused["index"] == REFUSED
    assert refused["lost"] is False


@pytest.mark.parametrize("generation", GENERATION_NAMES)
def test_pids_0_and_above_2_31_from_the_driver_are_dropped(
    c_nvml: CNvml, sleepers: list[int], generation: str
) -> None:
    data = c_nvml.data_file(
        "bad-pids",
        machine(
            sleepers,
            extra_on_gpu_2=(
                {"pid": 0, "used_memory_mib": 100},
                {"pid": 2**31, "used_memory_mib": 200},
            ),
        ),
        generation,
    )
    result = c_nvml.run(
        ["-m", "gputop", "snapshot", "--json"], generation=generation, binding=NEWEST, data=data
    )
    assert result.returncode == 0, result.stderr
    gpu = json.loads(result.stdout)["gpus"][2]
    assert {p["pid"] for p in gpu["processes"] or ()} == {sleepers[3]}


@combinations
def test_a_fan_above_100_percent_is_shown_as_the_driver_reports_it(
    c_nvml: CNvml,
    sleepers: list[int],
    generation: str,
    binding: str,
) -> None:
    snapshot = run_gputop(c_nvml, sleepers, "snapshot", generation, binding)
    assert snapshot["gpus"][2]["fan_percent"] == 120


@pytest.mark.parametrize("generation", [g for g in GENERATION_NAMES if g != "R460"])
def test_mps_clients_are_listed(c_nvml: CNvml, sleepers: list[int], generation: str) -> None:
    client = sleepers[4]
    mps_client = {"pid": client, "type": "M+C", "used_memory_mib": 3000}
    data = c_nvml.data_file("mps", machine(sleepers, extra_on_gpu_2=(mps_client,)), generation)
    result = c_nvml.run(
        ["-m", "gputop", "snapshot", "--json"], generation=generation, binding=NEWEST, data=data
    )
    assert result.returncode == 0, result.stderr
    gpu = json.loads(result.stdout)["gpus"][2]
    assert (client, 3000 * MIB) in {(p["pid"], p["used_memory_bytes"]) for p in gpu["processes"]}


@combinations
def test_p_state_32_reads_as_unknown(
    c_nvml: CNvml, sleepers: list[int], generation: str, binding: str
) -> None:
    snapshot = run_gputop(c_nvml, sleepers, "snapshot", generation, binding)
    states = [gpu["performance_state"] for gpu in snapshot["gpus"][1:]]
    assert states == [0, None]


def test_temperature_is_read_through_temperature_v_where_the_driver_has_it(
    c_nvml: CNvml, sleepers: list[int]
) -> None:
    """R550 exports nvmlDeviceGetTemperatureV; with the deprecated call failing, the
    temperature still arrives."""
    scenario = machine(sleepers)
    scenario["function_errors"]["nvmlDeviceGetTemperature"] = "UNKNOWN"
    data = c_nvml.data_file("temperature-v", scenario, "R550")
    result = c_nvml.run(
        ["-m", "gputop", "snapshot", "--json"], generation="R550", binding=NEWEST, data=data
    )
    assert result.returncode == 0, result.stderr
    temperatures = [gpu["temperature_c"] for gpu in json.loads(result.stdout)["gpus"][1:]]
    assert temperatures == [45, 45]


ENERGY_PROBE = (
    "import json; from gputop.core.sampling.source import open_backend; "
    "from gputop.core.sampling.nvml_usage import accounting_on, energy_mj; "
    "b = open_backend(environ={}); "
    "print(json.dumps([[energy_mj(b, i), accounting_on(b, i)] for i in range(3)]))"
)
"""What a job's supervisor reads beyond a snapshot (gputop/core/jobs/usage_meter.py)."""


@combinations
def test_the_energy_counter_is_read_through_the_real_binding(
    c_nvml: CNvml, sleepers: list[int], generation: str, binding: str
) -> None:
    data = c_nvml.data_file("machine", machine(sleepers), generation)
    result = c_nvml.run(["-c", ENERGY_PROBE], generation=generation, binding=binding, data=data)
    assert result.returncode == 0, result.stderr
    # The refused card has no handle; the H100s drew 300 W for the 30 s to the data's time.
    # The library has no accounting calls: accounting reads as off.
    h100 = [300 * 30 * 1000, False]
    assert json.loads(result.stdout) == [[None, False], h100, h100]


PROBE_THREAD = (
    "import json, sys, threading; from gputop.core.sampling.source import open_backend; "
    "from gputop.core.sampling.nvml_backend import SamplingOptions; "
    "b = open_backend(environ={}, options=SamplingOptions(driver_probe=sys.argv[1] == 'on')); "
    "b.sample(); "
    "print(json.dumps(any(t.name == 'process-driver-probe' for t in threading.enumerate())))"
)


@pytest.mark.parametrize("probe", ["on", "off"])
def test_a_supervisors_backend_starts_no_driver_probe(
    c_nvml: CNvml, sleepers: list[int], probe: str
) -> None:
    """A job's supervisor samples with the driver probe off (usage_meter.py): no child that
    loads libcuda per job. The dashboard's backend (on) does start it."""
    data = c_nvml.data_file("machine", machine(sleepers), "R550")
    result = c_nvml.run(["-c", PROBE_THREAD, probe], generation="R550", binding=NEWEST, data=data)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) is (probe == "on")
