"""The real-GPU suite's comparison code (tests/gpu/compare.py) against recorded outputs.

The recorded outputs in tests/gpu_recorded/ are hand-written examples in each tool's exact
format (their README says so), not measurements: these tests prove the parsing and the
verdicts, the real-GPU suite proves gputop (docs/real-gpu.md).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from gpu import compare
from helpers import TESTS

RECORDED = TESTS / "gpu_recorded"
MIB = 1 << 20


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


@pytest.fixture
def h100() -> dict[str, Any]:
    return {
        "before": compare.parse_query_gpu(recorded("h100x8_query_gpu_before.csv")),
        "after": compare.parse_query_gpu(recorded("h100x8_query_gpu_after.csv")),
        "snapshot": json.loads(recorded("h100x8_snapshot.json")),
    }


def failed(comparisons: list[compare.Comparison]) -> list[str]:
    return [c.what for c in comparisons if not c.ok]


def test_query_gpu_parsed_in_nvidia_smis_units(h100) -> None:
    before = h100["before"]
    assert len(before) == 8
    first = before["GPU-5a9e2f31-8c4d-4b1e-9f27-61d0c3a8b7e4"]
    assert first == {
        "index": 0,
        "uuid": "GPU-5a9e2f31-8c4d-4b1e-9f27-61d0c3a8b7e4",
        "name": "NVIDIA H100 80GB HBM3",
        "pci.bus_id": "00000000:18:00.0",
        "memory.total": 81559.0,
        "memory.used": 74213.0,
        "temperature.gpu": 61.0,
        "power.draw": 612.34,
        "power.limit": 700.0,
        "utilization.gpu": 99.0,
        "clocks.sm": 1980.0,
        "pstate": 0,
    }


def test_snapshot_between_two_readings_agrees_on_every_field(h100) -> None:
    ours = compare.readings_from_snapshot(h100["snapshot"])
    comparisons = compare.compare_readings(ours, h100["before"], h100["after"])
    assert len(comparisons) == 8 * (len(compare.QUERY_FIELDS) - 1)  # the UUID is the key
    assert failed(comparisons) == []


@pytest.mark.parametrize(
    ("field", "value", "what"),
    [
        ("memory_total_bytes", (81559 - 1) * MIB, "GPU 3 memory.total"),  # static: exact
        ("name", "NVIDIA H100 PCIe", "GPU 3 name"),
        ("pci_bus_id", "00000000:5E:00.0", "GPU 3 pci.bus_id"),
        ("index", 4, "GPU 3 index"),
        ("power_limit_w", 699.0, "GPU 3 power.limit"),
        ("temperature_c", 36, "GPU 3 temperature.gpu"),  # 33 before and after, ±2
        ("memory_used_bytes", 40 * MIB, "GPU 3 memory.used"),  # 3 MiB, ±16
        ("utilization_gpu", 11, "GPU 3 utilization.gpu"),  # 0, ±10 points
        ("performance_state", 2, "GPU 3 pstate"),
        ("power_w", 87.0, "GPU 3 power.draw"),  # 71.01-71.2 W, ±15 W
        ("temperature_c", None, "GPU 3 temperature.gpu"),  # a reading lost
    ],
)
def test_one_wrong_figure_fails_that_comparison_alone(h100, field, value, what) -> None:
    snapshot = copy.deepcopy(h100["snapshot"])
    snapshot["gpus"][3][field] = value
    comparisons = compare.compare_readings(
        compare.readings_from_snapshot(snapshot), h100["before"], h100["after"]
    )
    assert failed(comparisons) == [what]


def test_moving_values_pass_within_the_range_and_tolerance_and_fail_just_outside(h100) -> None:
    def temperature(value: float) -> bool:
        snapshot = copy.deepcopy(h100["snapshot"])
        snapshot["gpus"][0]["temperature_c"] = value  # 61 before, 62 after, ±2
        ours = compare.readings_from_snapshot(snapshot)
        return not failed(compare.compare_readings(ours, h100["before"], h100["after"]))

    assert [temperature(v) for v in (58.9, 59, 61.5, 64, 64.1)] == [
        False,
        True,
        True,
        True,
        False,
    ]
    comparison = compare.compare_value("x", "power.draw", 700.0, 598.1, 612.34)
    assert comparison.ok  # 612.34 + 15 % of it
    assert comparison.reference == [598.1, 612.34]
    assert not compare.compare_value("x", "power.draw", 705.0, 598.1, 612.34).ok


def test_a_gpu_on_one_side_only_is_a_failure_of_its_own(h100) -> None:
    snapshot = copy.deepcopy(h100["snapshot"])
    del snapshot["gpus"][7]
    comparisons = compare.compare_readings(
        compare.readings_from_snapshot(snapshot), h100["before"], h100["after"]
    )
    assert failed(comparisons) == ["GPU GPU-3e4f5a6b-7c8d-49e0-8f1a-2b3c4d5e6f70"]
    extra = copy.deepcopy(h100["snapshot"])
    extra["gpus"].append(dict(extra["gpus"][0], uuid="GPU-ffffffff-0000-0000-0000-000000000000"))
    comparisons = compare.compare_readings(compare.readings_from_snapshot(extra), h100["before"])
    assert failed(comparisons) == ["GPU GPU-ffffffff-0000-0000-0000-000000000000"]


def test_mig_server_not_available_values_are_none_and_compared_as_such() -> None:
    readings = compare.parse_query_gpu(recorded("mig_query_gpu.csv"))
    mig_card = readings["GPU-4c0e7a2b-91d3-4f6e-8a5b-3c2d1e0f9a8b"]
    assert mig_card["utilization.gpu"] is None
    assert compare.compare_value("u", "utilization.gpu", None, None, None).ok
    wrong = compare.compare_value("u", "utilization.gpu", 0, None, None)
    assert not wrong.ok
    assert "nvidia-smi has no reading" in wrong.note
    assert not compare.compare_value("u", "utilization.gpu", None, 5.0, 5.0).ok


def test_nvidia_smi_lines_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(ValueError, match="3 fields, expected 12"):
        compare.parse_query_gpu("0, GPU-1, name\n")
    with pytest.raises(ValueError, match="not a P-state"):
        compare.parse_pstate("fast")


def test_compute_apps_parsed_with_not_available_memory() -> None:
    apps = compare.parse_compute_apps(recorded("mig_compute_apps.csv"))
    assert [(a.pid, a.process_name, a.used_memory_mib) for a in apps] == [
        (73110, "python3", 10240.0),
        (73402, "./bench", None),
    ]
    assert compare.parse_compute_apps("No running processes found\n") == []
    assert compare.parse_compute_apps("") == []


def test_the_checks_process_listed_with_pid_user_and_memory(h100) -> None:
    apps = compare.parse_compute_apps(recorded("h100x8_compute_apps.csv"))
    gpu4 = "GPU-7e6d5c4b-3a29-4817-a6b5-c4d3e2f1a0b9"

    def check(**changes: Any) -> list[str]:
        arguments = {
            "pid": 51877,
            "user": "root",
            "gpu_uuid": gpu4,
            "held_bytes": 1 << 30,
            "overhead_mib": 1024,
        }
        arguments.update(changes)
        comparisons = compare.process_comparisons(h100["snapshot"], apps, **arguments)
        assert len(comparisons) == (4 if arguments["pid"] == 51877 else 1)
        return failed(comparisons)

    assert check() == []
    assert check(user="alice") == ["pid 51877 user"]
    assert check(held_bytes=2 << 30) == ["pid 51877 memory against what it holds"]
    assert check(overhead_mib=256) == ["pid 51877 memory against what it holds"]
    assert check(gpu_uuid="GPU-5a9e2f31-8c4d-4b1e-9f27-61d0c3a8b7e4") == ["pid 51877 listed"]
    assert check(pid=4242) == ["pid 4242 listed"]
    off = [compare.ComputeApp(51877, "python", 1530.0, gpu4)]
    comparisons = compare.process_comparisons(
        h100["snapshot"], off, pid=51877, user="root", gpu_uuid=gpu4,
        held_bytes=1 << 30, overhead_mib=1024,
    )  # fmt: skip
    assert failed(comparisons) == ["pid 51877 memory against nvidia-smi"]


def test_gpu_list_with_mig_devices() -> None:
    gpus = compare.parse_gpu_list(recorded("mig_list.txt"))
    assert [(g["index"], g["uuid"][:12], len(g["migs"])) for g in gpus] == [
        (0, "GPU-4c0e7a2b", 3),
        (1, "GPU-6e1f8b3c", 0),
    ]
    assert gpus[0]["migs"][1] == {
        "profile": "2g.20gb",
        "device": 1,
        "uuid": "MIG-c4a3b2d1-8e7f-4a5b-a0c9-2e3f4a5b6c7d",
    }
    assert len(compare.parse_gpu_list(recorded("h100x8_list.txt"))) == 8


def test_every_visible_devices_form_of_an_eight_card_machine() -> None:
    gpus = compare.parse_gpu_list(recorded("h100x8_list.txt"))
    forms = dict(compare.visible_device_forms(gpus))
    assert forms["unset"] is None
    assert forms["every index, reversed"] == "7,6,5,4,3,2,1,0"
    assert forms["full UUID"] == gpus[7]["uuid"]
    assert forms["UUID prefix"] == "GPU-3e4f5a6b"
    assert forms["two UUIDs, reversed"] == f"{gpus[7]['uuid']},{gpus[0]['uuid']}"
    assert forms["an invalid entry after a valid one"] == "0,15"
    assert forms["a duplicate"] == "0,0"
    assert forms["empty"] == ""
    assert forms["-1"] == "-1"
    assert not any(label.startswith("MIG") for label in forms)


def test_mig_forms_where_mig_is_on() -> None:
    forms = dict(compare.visible_device_forms(compare.parse_gpu_list(recorded("mig_list.txt"))))
    assert forms["MIG UUID"] == "MIG-b3f2a1c0-7d6e-5f4a-9b8c-1d2e3f4a5b6c"
    assert forms["MIG UUID prefix"] == "MIG-b3f2a1c0"
    assert forms["two MIG UUIDs"].count("MIG-") == 2
    assert forms["a MIG UUID and a GPU UUID"].endswith("GPU-4c0e7a2b-91d3-4f6e-8a5b-3c2d1e0f9a8b")


def test_uuid_prefix_grows_until_unique() -> None:
    a = "GPU-12345678-9abc-4def-8123-456789abcdef"
    b = "GPU-12345678-9abd-4def-8123-456789abcdef"
    assert compare.unique_prefix(a, [a, b]) == "GPU-12345678-9abc"
    assert compare.unique_prefix(a, [a]) == "GPU-12345678"


def test_driver_bytes_named_as_nvidia_smi_names_them() -> None:
    known = [line for line in compare.parse_gpu_list(recorded("mig_list.txt"))]
    uuids = [g["uuid"] for g in known] + [m["uuid"] for g in known for m in g["migs"]]
    raw = [compare.uuid_hex(uuids[3]), compare.uuid_hex(uuids[1]), "ab" * 16]
    assert compare.name_cuda_uuids(raw, uuids) == [
        uuids[3],
        uuids[1],
        "GPU-abababab-abab-abab-abab-abababababab",
    ]


def test_mapping_same_devices_in_the_same_order() -> None:
    document = {
        "source": "driver",
        "devices": [
            {"uuid": "GPU-b", "mig_uuid": None},
            {"uuid": "GPU-a", "mig_uuid": "MIG-a1"},
        ],
    }
    assert compare.mapping_comparison("x", document, ["GPU-b", "MIG-a1"]).ok
    assert not compare.mapping_comparison("x", document, ["MIG-a1", "GPU-b"]).ok
    assert not compare.mapping_comparison("x", document, ["GPU-b"]).ok
    assert compare.mapping_comparison("empty", {"devices": []}, []).ok


def test_exporter_gauges_read_back_and_compared(h100) -> None:
    samples = compare.parse_prometheus(recorded("exporter_h100x8.prom"))
    process = next(s for s in samples if s[0] == "gputop_process_memory_used_bytes")
    assert process[1]["command"] == 'python "train.py"'
    ours = compare.readings_from_exporter(samples)
    gpu0 = "GPU-5a9e2f31-8c4d-4b1e-9f27-61d0c3a8b7e4"
    assert ours[gpu0]["memory.total"] == 81559.0  # 81559.25 MiB cut as nvidia-smi cuts it
    before = {gpu0: h100["before"][gpu0]}
    after = {gpu0: h100["after"][gpu0]}
    comparisons = compare.compare_readings(ours, before, after, source="the exporter")
    assert len(comparisons) == len(compare.QUERY_FIELDS) - 1
    assert failed(comparisons) == []
    hotter = [(n, lb, 80.0 if n == "DCGM_FI_DEV_GPU_TEMP" else v) for n, lb, v in samples]
    comparisons = compare.compare_readings(compare.readings_from_exporter(hotter), before, after)
    assert failed(comparisons) == ["GPU 0 temperature.gpu"]
    with pytest.raises(ValueError, match="not a Prometheus sample line"):
        compare.parse_prometheus("what is this\n")


def test_report_is_strict_json_and_readable_markdown() -> None:
    results = [
        compare.Result(
            "snapshot: matches | nvidia-smi",
            "passed",
            [compare.Comparison("GPU 0 power.draw", float("nan"), 70.1, "±15 W", False, "x\ny")],
            {"ratio": float("inf")},
        ),
        compare.Result("activity: copy", "skipped", note="no activity object"),
    ]
    machine = {"driver": "550.127.05", "gpus": ["GPU 0: H100 \x1b[2J\x1b]0;owned\x07"]}
    document = json.loads(compare.report_json(machine, results))
    assert document["summary"] == {"passed": 1, "skipped": 1}
    assert document["results"][0]["comparisons"][0]["gputop"] is None
    assert document["results"][0]["numbers"]["ratio"] is None
    text = compare.report_markdown(machine, results)
    assert "| snapshot: matches \\| nvidia-smi | passed | 1 | 1 |" in text
    assert "| GPU 0 power.draw | — | 70.1 | ±15 W | **NO** | x y |" in text
    assert "| activity: copy | skipped | 0 | 0 | no activity object |" in text
    assert "**Summary**: no check ran" in compare.report_markdown(machine, [])
    assert "\x1b" not in text and "\x07" not in text  # a driver's odd text stays inert
    assert document["machine"]["gpus"] == ["GPU 0: H100 \x1b[2J\x1b]0;owned\x07"]  # as seen
