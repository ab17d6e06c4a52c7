"""Scenario files: the built-in ones, the defaults, and a precise message for each mistake."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.other_user import gputop_as_other_user

from gputop.core.errors import ScenarioError
from gputop.core.fake import BUILTIN_SCENARIOS, resolve_scenario_path
from gputop.core.fake.scenario import Scenario, load_scenario
from gputop.core.fake.scenario_types import DEFAULT_START_TIME

UUID_0 = "GPU-5a9e5b38-bd6d-2f23-3b22-d42f6e26aa55"
UUID_1 = "GPU-0c4e3a71-5b8d-4f1e-9a2c-7d6b5e4f3a21"
MIG_UUID = "MIG-1f2e3d4c-5b6a-4789-8a9b-0c1d2e3f4a5b"
SIMULATED_PID_FLOOR = 4_200_000


def builtin(name: str) -> Scenario:
    return load_scenario(resolve_scenario_path(name))


def gpu(**fields: Any) -> dict[str, Any]:
    return {"name": "NVIDIA A100-SXM4-80GB", "uuid": UUID_0, **fields}


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "lab.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def every_process(scenario: Scenario) -> list[Any]:
    return [
        process
        for g in scenario.gpus
        for process in (*g.processes, *(p for m in g.mig_devices for p in m.processes))
    ]


# -- built-in scenarios --------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILTIN_SCENARIOS)
def test_every_builtin_scenario_loads_with_a_one_line_description(name: str) -> None:
    scenario = builtin(name)
    assert scenario.gpus
    assert scenario.description.strip()
    assert "\n" not in scenario.description


@pytest.mark.parametrize("name", BUILTIN_SCENARIOS)
def test_builtin_simulated_pids_lie_above_linux_pid_max(name: str) -> None:
    assert all(p.pid >= SIMULATED_PID_FLOOR for p in every_process(builtin(name)))


@pytest.mark.parametrize("name", BUILTIN_SCENARIOS)
def test_builtin_gpus_are_listed_in_pci_bus_order(name: str) -> None:
    bus_ids = [g.pci_bus_id for g in builtin(name).gpus]
    assert None not in bus_ids
    assert bus_ids == sorted(bus_ids)  # type: ignore[type-var]


def test_v100x4_is_the_spec_example_on_four_cards() -> None:
    scenario = builtin("v100x4")
    assert [g.name for g in scenario.gpus] == ["Tesla V100-SXM2-16GB"] * 4
    assert [g.memory_used_mib.value_at(0) for g in scenario.gpus] == [8124, 4252, 11, 1582]  # type: ignore[union-attr]
    assert scenario.gpus[0].uuid == UUID_0
    assert scenario.driver_version == "418.67"
    assert scenario.cuda_driver_version == 10010
    assert all(g.fan_percent is None for g in scenario.gpus)


def test_v100x4_runs_train_and_eval_on_gpu_0() -> None:
    processes = builtin("v100x4").gpus[0].processes
    assert [(p.pid, p.cmd, p.used_memory_mib.value_at(0)) for p in processes] == [  # type: ignore[union-attr]
        (4202277, ("python", "train.py"), 3289),
        (4327232, ("python", "eval.py"), 1389),
    ]
    assert {p.user for p in processes} == {"ubuntu"}


def test_dgx_h100_has_eight_nvlinked_h100s_and_about_200_processes() -> None:
    scenario = builtin("dgx-h100")
    assert [g.name for g in scenario.gpus] == ["NVIDIA H100 80GB HBM3"] * 8
    assert {(g.multiprocessor_count, g.cuda_compute_capability) for g in scenario.gpus} == {
        (132, (9, 0))
    }
    assert {g.nvlink_count for g in scenario.gpus} == {18}
    assert {g.power_limit_w for g in scenario.gpus} == {700}
    assert 180 <= len(every_process(scenario)) <= 220


def test_mixed_fastest_first_order_differs_from_pci_order() -> None:
    gpus = builtin("mixed").gpus
    assert all(g.cuda_compute_capability and g.multiprocessor_count for g in gpus)
    fastest_first = sorted(
        range(len(gpus)),
        key=lambda i: (gpus[i].cuda_compute_capability, gpus[i].multiprocessor_count),
        reverse=True,
    )
    assert fastest_first != list(range(len(gpus)))


def test_mig_has_one_gpu_split_in_three_and_one_whole() -> None:
    split, whole = builtin("mig").gpus
    assert split.mig_mode == (1, 1)
    assert [m.profile for m in split.mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb"]
    assert [m.multiprocessor_count for m in split.mig_devices] == [42, 28, 14]
    assert sum(1 for m in split.mig_devices if m.processes) == 2
    assert whole.mig_mode == (0, 0)
    assert whole.processes


def test_faulty_exercises_every_failure() -> None:
    scenario = builtin("faulty")
    assert len(scenario.gpus) == 3
    assert scenario.missing_functions == {
        "nvmlDeviceGetProcessUtilization",
        "nvmlSystemGetCudaDriverVersion_v2",
    }
    assert any("nvmlDeviceGetPowerUsage" in g.no_permission for g in scenario.gpus)
    assert any(g.lost_after_s == 5 for g in scenario.gpus)
    assert any(g.fan_percent is None and g.power_limit_w is None for g in scenario.gpus)
    processes = every_process(scenario)
    assert any(p.user is None and not p.cmd for p in processes)
    assert any(p.used_memory_mib is None for p in processes)


# -- defaults ------------------------------------------------------------------------------


def test_optional_fields_default_as_the_spec_says(tmp_path: Path) -> None:
    path = write(tmp_path, {"driver_version": "550.127.05", "gpus": [gpu()]})
    scenario = load_scenario(path)
    assert scenario.nvml_version == "12.550.127.05"
    assert scenario.start_time == DEFAULT_START_TIME == 1767225600
    assert scenario.missing_functions == frozenset()
    assert scenario.gpus[0].fan_percent is None
    assert scenario.gpus[0].processes == ()


def test_a_given_nvml_version_wins_over_the_default(tmp_path: Path) -> None:
    path = write(
        tmp_path, {"driver_version": "418.67", "nvml_version": "10.418.67", "gpus": [gpu()]}
    )
    assert load_scenario(path).nvml_version == "10.418.67"


def test_a_process_type_defaults_to_compute(tmp_path: Path) -> None:
    path = write(tmp_path, {"gpus": [gpu(processes=[{"pid": 4200001}])]})
    assert load_scenario(path).gpus[0].processes[0].type == "C"


def test_a_lspci_style_bus_id_is_normalised_to_nvmls_form(tmp_path: Path) -> None:
    path = write(tmp_path, {"gpus": [gpu(pci_bus_id="0000:3b:00.0")]})
    assert load_scenario(path).gpus[0].pci_bus_id == "00000000:3B:00.0"


def test_keys_starting_with_an_underscore_are_comments(tmp_path: Path) -> None:
    path = write(tmp_path, {"_note": "made by hand", "gpus": [gpu(_why="spare card")]})
    assert load_scenario(path).gpus[0].name == "NVIDIA A100-SXM4-80GB"


# -- resolving names -----------------------------------------------------------------------


def test_a_builtin_name_resolves_to_its_packaged_file() -> None:
    path = resolve_scenario_path("demo")
    assert path.name == "demo.json"
    assert path.is_file()


def test_a_path_resolves_to_itself(tmp_path: Path) -> None:
    path = write(tmp_path, {"gpus": [gpu()]})
    assert resolve_scenario_path(str(path)) == path


def test_an_unknown_name_lists_the_builtin_scenarios() -> None:
    with pytest.raises(ScenarioError, match="no built-in scenario of that name") as caught:
        resolve_scenario_path("dmeo")
    assert caught.value.path == "dmeo"
    assert all(name in str(caught.value) for name in BUILTIN_SCENARIOS)


def test_a_missing_file_says_so_and_lists_the_builtin_scenarios(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.json")
    with pytest.raises(ScenarioError, match="no such scenario file") as caught:
        resolve_scenario_path(missing)
    assert caught.value.path == missing
    assert "demo" in str(caught.value)


# -- mistakes ------------------------------------------------------------------------------


def test_loading_a_missing_file_says_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="file not found") as caught:
        load_scenario(tmp_path / "gone.json")
    assert str(tmp_path / "gone.json") in str(caught.value)


def test_loading_a_directory_says_it_is_one(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="is a directory"):
        load_scenario(tmp_path)


def test_a_file_that_is_not_utf8_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "lab.json"
    path.write_bytes(b'{"gpus": "\xff\xfe"}')
    with pytest.raises(ScenarioError, match="not UTF-8 text"):
        load_scenario(path)


def test_bad_json_gives_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "gpus": [\n    {"name": "x",}\n  ]\n}')
    with pytest.raises(ScenarioError, match=r"not valid JSON: .* at line 3 column 18") as caught:
        load_scenario(path)
    assert caught.value.path == str(path)


def test_a_duplicate_uuid_names_both_gpus(tmp_path: Path) -> None:
    path = write(tmp_path, {"gpus": [gpu(), gpu(uuid=UUID_1), gpu()]})
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert caught.value.field == "gpus[2].uuid"
    assert "duplicate uuid" in caught.value.problem
    assert "gpus[0].uuid" in caught.value.problem


MIG_DEVICE = {"uuid": MIG_UUID, "gpu_instance_id": 1, "compute_instance_id": 0}


@pytest.mark.parametrize(
    ("document", "field", "problem"),
    [
        pytest.param([gpu()], None, "top level must be a JSON object", id="top-level-list"),
        pytest.param({"gpus": None}, "gpus", "is required", id="no-gpus"),
        pytest.param({"gpus": []}, "gpus", "at least one GPU", id="empty-gpus"),
        pytest.param({"gpus": {"0": gpu()}}, "gpus", "must be a list", id="gpus-not-list"),
        pytest.param({"gpus": ["A100"]}, "gpus[0]", "must be an object", id="gpu-not-object"),
        pytest.param({"gpus": [{"name": "x"}]}, "gpus[0].uuid", "is required", id="no-uuid"),
        pytest.param(
            {"gpus": [gpu(uuid="GPU-1234")]}, "gpus[0].uuid", "is not a GPU uuid", id="bad-uuid"
        ),
        pytest.param({"gpus": [{"uuid": UUID_0}]}, "gpus[0].name", "is required", id="no-name"),
        pytest.param(
            {"gpus": [gpu(name="  ")]}, "gpus[0].name", "must not be empty", id="blank-name"
        ),
        pytest.param(
            {"gpus": [gpu(power_limit_w="300 W")]},
            "gpus[0].power_limit_w",
            "must be a number, got the string '300 W'",
            id="wrong-type-number",
        ),
        pytest.param(
            {"gpus": [gpu(multiprocessor_count=10.5)]},
            "gpus[0].multiprocessor_count",
            "must be a whole number",
            id="wrong-type-integer",
        ),
        pytest.param(
            {"gpus": [gpu(persistence_mode="yes")]},
            "gpus[0].persistence_mode",
            "must be true, false, 0 or 1",
            id="wrong-type-flag",
        ),
        pytest.param(
            {"gpus": [gpu(serial=1234)]}, "gpus[0].serial", "must be a string", id="wrong-type-str"
        ),
        pytest.param(
            {"driver_version": 550}, "driver_version", "must be a string", id="wrong-type-driver"
        ),
        pytest.param(
            {"gpus": [gpu(temprature_c=40)]},
            "gpus[0].temprature_c",
            "unknown field 'temprature_c'",
            id="unknown-field",
        ),
        pytest.param(
            {"gpus": [gpu(utilization_gpu={"amp": 10, "period": 0})]},
            "gpus[0].utilization_gpu.period",
            "must be greater than 0",
            id="bad-signal",
        ),
        pytest.param(
            {"gpus": [gpu(clocks_mhz={"graphics": "fast"})]},
            "gpus[0].clocks_mhz.graphics",
            "a signal must be a number or an object",
            id="bad-clock-signal",
        ),
        pytest.param(
            {"gpus": [gpu(max_clocks_mhz={"shader": 1410})]},
            "gpus[0].max_clocks_mhz.shader",
            "unknown field",
            id="bad-clock-name",
        ),
        pytest.param(
            {"gpus": [gpu(pci_bus_id="1B:00.0")]},
            "gpus[0].pci_bus_id",
            "is not a PCI bus id",
            id="bad-bus-id",
        ),
        pytest.param(
            {"gpus": [gpu(cuda_compute_capability="9.0")]},
            "gpus[0].cuda_compute_capability",
            "must be [major, minor]",
            id="bad-compute-capability",
        ),
        pytest.param(
            {"gpus": [gpu(performance_state=16)]},
            "gpus[0].performance_state",
            "must be one of 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 32, got 16",
            id="pstate-range",
        ),
        pytest.param(
            {"gpus": [gpu(compute_mode=5)]},
            "gpus[0].compute_mode",
            "must be one of 0, 1, 2, 3",
            id="compute-mode",
        ),
        pytest.param(
            {"gpus": [gpu(processes=[{"pid": 4200001, "type": "X"}])]},
            "gpus[0].processes[0].type",
            "must be one of C, G, C+G, M+C, got 'X'",
            id="bad-process-type",
        ),
        pytest.param(
            {"gpus": [gpu(processes=[{"type": "C"}])]},
            "gpus[0].processes[0].pid",
            "is required",
            id="process-without-pid",
        ),
        pytest.param(
            {"gpus": [gpu(processes=[{"pid": 7, "cmd": "python train.py"}])]},
            "gpus[0].processes[0].cmd",
            "must be a list of strings",
            id="cmd-not-list",
        ),
        pytest.param(
            {"gpus": [gpu(processes=[{"pid": 7}, {"pid": 7}])]},
            "gpus[0].processes[1].pid",
            "pid 7 is already listed at gpus[0].processes[0]",
            id="duplicate-pid",
        ),
        pytest.param(
            {"gpus": [gpu(mig_devices=[MIG_DEVICE])]},
            "gpus[0].mig_devices",
            "mig_devices needs mig_mode",
            id="mig-devices-without-mig-mode",
        ),
        pytest.param(
            {"gpus": [gpu(mig_mode=[0, 0], mig_devices=[MIG_DEVICE])]},
            "gpus[0].mig_devices",
            "needs MIG mode on",
            id="mig-devices-with-mig-off",
        ),
        pytest.param(
            {"gpus": [gpu(mig_mode=[2, 0])]},
            "gpus[0].mig_mode[0]",
            "must be one of 0, 1",
            id="bad-mig-mode",
        ),
        pytest.param(
            {"gpus": [gpu(mig_mode=[1, 1], mig_devices=[{**MIG_DEVICE, "uuid": UUID_1}])]},
            "gpus[0].mig_devices[0].uuid",
            "is not a MIG uuid",
            id="bad-mig-uuid",
        ),
        pytest.param(
            {
                "gpus": [
                    gpu(
                        mig_mode=[1, 1],
                        mig_devices=[MIG_DEVICE, {**MIG_DEVICE, "gpu_instance_id": 2}],
                    )
                ]
            },
            "gpus[0].mig_devices[1].uuid",
            "duplicate MIG uuid",
            id="duplicate-mig-uuid",
        ),
        pytest.param(
            {
                "gpus": [
                    gpu(
                        mig_mode=[1, 1],
                        mig_devices=[MIG_DEVICE, {**MIG_DEVICE, "uuid": MIG_UUID[:-1] + "c"}],
                    )
                ]
            },
            "gpus[0].mig_devices[1]",
            "duplicate (gpu_instance_id, compute_instance_id)",
            id="duplicate-mig-instance",
        ),
        pytest.param(
            {"gpus": [gpu(mig_mode=[1, 1], mig_devices=[{"uuid": MIG_UUID}])]},
            "gpus[0].mig_devices[0].gpu_instance_id",
            "is required",
            id="mig-without-instance-id",
        ),
        pytest.param(
            {"missing_functions": ["GetFanSpeed"]},
            "missing_functions[0]",
            "is not an NVML function name",
            id="bad-missing-function",
        ),
        pytest.param(
            {"gpus": [gpu(no_permission="nvmlDeviceGetPowerUsage")]},
            "gpus[0].no_permission",
            "must be a list of strings",
            id="bad-no-permission",
        ),
        pytest.param(
            {"gpus": [gpu(lost_after_s=-1)]},
            "gpus[0].lost_after_s",
            "must be at least 0",
            id="negative-lost-after",
        ),
    ],
)
def test_each_mistake_gets_a_message_naming_file_and_field(
    tmp_path: Path, document: Any, field: str | None, problem: str
) -> None:
    if isinstance(document, dict):
        document = {"gpus": [gpu()], **document}
    path = write(tmp_path, document)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    error = caught.value
    assert error.path == str(path)
    assert error.field == field
    assert problem in error.problem
    assert str(error).startswith(f"Bad scenario {path}: ")


def test_a_scenario_the_user_may_not_reach_is_a_clear_error_not_a_traceback(
    tmp_path: Path,
) -> None:
    """A file in a folder the user cannot enter: Path.is_file raises PermissionError there,
    which used to end in gputop's "internal error" (exit 70)."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    path = write(private, {"gpus": [gpu()]})
    done = gputop_as_other_user("snapshot", "--fake", str(path), env={})
    assert done.returncode == 2, done.stderr
    assert "cannot read the file: Permission denied" in done.stderr
    assert "internal error" not in done.stderr
