"""GPM activity through the real nvidia-ml-py over the C NVML, under both bindings.

``python -m gputop snapshot --json`` (no ``--fake``) runs on each driver generation's
library (docs/c-nvml.md): the figures must equal what the imitated driver answers, per GPU
and per MIG GPU instance, none before Hopper or on drivers without GPM, and a driver that
writes past ``numMetrics`` must be caught. The numbers are the data file's, so the
comparison is exact. docs/activity.md says what each figure is.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cnvml.fixtures import BINDINGS, NEWEST, OLDEST, CNvml
from helpers.prometheus import running_exporter
from helpers.waiting import wait_for
from prometheus_client.parser import text_string_to_metric_families

from gputop.core.model import ACTIVITY_KEYS

MIB = 1024 * 1024
H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "memory_total_mib": 81559,
    "cuda_compute_capability": [9, 0],
    "utilization_gpu": 97,
}
BUSY = {
    "graphics": 97, "sm_active": 61.5, "sm_occupancy": 27.25, "tensor_active": 44.5,
    "dram_active": 52, "fp64": 0, "fp32": 8.5, "fp16": 30, "pcie_tx_mib_s": 12.5,
    "pcie_rx_mib_s": 40, "nvlink_rx_mib_s": 9000, "nvlink_tx_mib_s": 8500,
}  # fmt: skip
"""An H100 in training: util 97 % but SMs 61.5 % active."""
FIGURE_OF = {
    "graphics": "graphics_percent", "sm_active": "sm_active_percent",
    "sm_occupancy": "sm_occupancy_percent", "tensor_active": "tensor_active_percent",
    "dram_active": "dram_active_percent", "fp64": "fp64_percent", "fp32": "fp32_percent",
    "fp16": "fp16_percent", "pcie_tx_mib_s": "pcie_tx_bytes_per_s",
    "pcie_rx_mib_s": "pcie_rx_bytes_per_s", "nvlink_rx_mib_s": "nvlink_rx_bytes_per_s",
    "nvlink_tx_mib_s": "nvlink_tx_bytes_per_s",
}  # fmt: skip
WITH_GPM = ("R535.54", "R550")
WITHOUT_GPM = ("R460", "R470")


def figures(signals: dict[str, float]) -> dict[str, float | None]:
    want: dict[str, float | None] = dict.fromkeys(ACTIVITY_KEYS)
    for key, value in signals.items():
        figure = FIGURE_OF[key]
        want[figure] = float(value) * (MIB if figure.endswith("bytes_per_s") else 1)
    return want


def machine(**top: Any) -> dict[str, Any]:
    """A busy H100, an A100 (no GPM) and an H100 in MIG mode with two GPU instances."""
    return {
        "description": "activity over the C NVML",
        **top,
        "gpus": [
            {**H100, "uuid": "GPU-1b1b1b1b-1111-4111-8111-111111111111",
             "pci_bus_id": "00000000:1B:00.0", "activity": BUSY,
             "clock_event_reasons": [{"reasons": ["sw_power_cap"], "until_s": 1000}]},
            {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-2c2c2c2c-2222-4222-8222-222222222222",
             "pci_bus_id": "00000000:2C:00.0", "memory_total_mib": 81920,
             "cuda_compute_capability": [8, 0], "utilization_gpu": 100, "pcie_tx_kbps": 2000,
             "pcie_rx_kbps": 3000},
            {**H100, "uuid": "GPU-3d3d3d3d-3333-4333-8333-333333333333",
             "pci_bus_id": "00000000:3D:00.0", "activity": {"sm_active": 20},
             "mig_mode": [1, 1],
             "mig_devices": [
                 {"uuid": "MIG-aaaaaaaa-5b6a-4789-8a9b-0c1d2e3f4a5b", "gpu_instance_id": 1,
                  "compute_instance_id": 0, "memory_total_mib": 40000,
                  "multiprocessor_count": 60, "profile": "4g.40gb",
                  "activity": {"sm_active": 88.5, "tensor_active": 70, "dram_active": 35}},
                 {"uuid": "MIG-bbbbbbbb-5b6a-4789-8a9b-0c1d2e3f4a5b", "gpu_instance_id": 1,
                  "compute_instance_id": 1, "memory_total_mib": 40000,
                  "multiprocessor_count": 60, "profile": "4g.40gb"},
                 {"uuid": "MIG-cccccccc-5b6a-4789-8a9b-0c1d2e3f4a5b", "gpu_instance_id": 2,
                  "compute_instance_id": 0, "memory_total_mib": 20000,
                  "multiprocessor_count": 32, "profile": "2g.20gb",
                  "activity": {"sm_active": 3.5}},
             ]},
        ],
    }  # fmt: skip


def snapshot(c_nvml: CNvml, generation: str, binding: str, **top: Any) -> dict[str, Any]:
    data = c_nvml.data_file("activity", machine(**top), generation)
    return c_nvml.gputop_json(
        ["snapshot", "--json"], generation=generation, binding=binding, data=data
    )


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("generation", WITH_GPM)
def test_figures_equal_what_the_driver_answers_per_gpu_and_mig_instance(
    c_nvml: CNvml, generation: str, binding: str
) -> None:
    gpus = snapshot(c_nvml, generation, binding)["gpus"]
    assert gpus[0]["activity"] == figures(BUSY)
    assert gpus[0]["clock_event_reasons"] == ["sw_power_cap"]
    assert gpus[0]["throttled_since"] is not None
    # no GPM before Hopper: nothing but PCIe from nvmlDeviceGetPcieThroughput (KB/s)
    assert gpus[1]["activity"] == {
        **dict.fromkeys(ACTIVITY_KEYS),
        "pcie_tx_bytes_per_s": 2_000_000,
        "pcie_rx_bytes_per_s": 3_000_000,
    }
    assert gpus[2]["activity"] == figures({"sm_active": 20})
    migs = gpus[2]["mig_devices"]
    assert [m["gpu_instance_id"] for m in migs] == [1, 1, 2]
    instance_1 = figures({"sm_active": 88.5, "tensor_active": 70, "dram_active": 35})
    assert [m["activity"] for m in migs] == [instance_1, instance_1, figures({"sm_active": 3.5})]


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("generation", WITHOUT_GPM)
def test_drivers_without_gpm_give_no_activity_and_still_the_throttle_reasons(
    c_nvml: CNvml, generation: str, binding: str
) -> None:
    gpus = snapshot(c_nvml, generation, binding)["gpus"]
    for gpu in (gpus[0], gpus[2]):
        assert all(gpu["activity"][k] is None for k in ACTIVITY_KEYS if "pcie" not in k)
        for mig in gpu["mig_devices"]:
            assert set(mig["activity"].values()) == {None}
    # R470 and older answer the older call
    assert gpus[0]["clock_event_reasons"] == ["sw_power_cap"]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_driver_that_writes_past_num_metrics_is_caught(c_nvml: CNvml, binding: str) -> None:
    """The imitation's fault mode writes one entry more than asked: gputop's guard sees it
    and reports no figures rather than trusting a driver that writes where it may not."""
    data = c_nvml.data_file("overrun", machine(), "R550")
    data.write_text(data.read_text() + "system gpm_overrun 1\n")
    gpus = c_nvml.gputop_json(
        ["snapshot", "--json"], generation="R550", binding=binding, data=data
    )["gpus"]
    assert gpus[0]["activity"] == dict.fromkeys(ACTIVITY_KEYS)
    assert all(set(m["activity"].values()) == {None} for m in gpus[2]["mig_devices"])


GUARD_PROBE = r"""
import ctypes, json, sys, time
import pynvml
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(0)
one, two = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
pynvml.nvmlGpmSampleGet(handle, one)
time.sleep(0.11)
pynvml.nvmlGpmSampleGet(handle, two)
request = pynvml.c_nvmlGpmMetricsGet_t()
ctypes.memset(ctypes.addressof(request), 0x5A, ctypes.sizeof(request))
request.version, request.numMetrics = 1, 3
request.sample1, request.sample2 = one, two
for entry, metric in zip(request.metrics, (1, 2, 5)):
    entry.metricId = metric
pynvml.nvmlGpmMetricsGet(request)
rest = ctypes.string_at(ctypes.addressof(request.metrics[3]),
                        ctypes.sizeof(request) - type(request).metrics.offset
                        - 3 * ctypes.sizeof(request.metrics[0]))
print(json.dumps({"length": len(request.metrics),
                  "values": [request.metrics[i].value for i in range(3)],
                  "untouched": set(rest) == {0x5A}}))
"""


@pytest.mark.parametrize("overrun", [False, True])
@pytest.mark.parametrize("binding", BINDINGS)
def test_the_imitation_writes_only_num_metrics_entries_of_either_binding_struct(
    c_nvml: CNvml, binding: str, overrun: bool
) -> None:
    """The check itself catches an imitation that writes past ``numMetrics``: with the
    fault mode on it must fail, so it is not a check that cannot fail."""
    data = c_nvml.data_file("guard", machine(), "R550")
    if overrun:
        data.write_text(data.read_text() + "system gpm_overrun 1\n")
    result = c_nvml.run(["-c", GUARD_PROBE], generation="R550", binding=binding, data=data)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["length"] == (98 if binding == OLDEST else 477)
    assert answer["values"] == [97, 61.5, 44.5]
    assert answer["untouched"] is (not overrun)


def test_a_vgpu_profile_without_gpm_shows_nothing(c_nvml: CNvml) -> None:
    gpus = snapshot(
        c_nvml,
        "R550",
        NEWEST,
        function_errors={"nvmlGpmQueryDeviceSupport": "NOT_SUPPORTED"},
    )["gpus"]
    assert gpus[0]["activity"] == dict.fromkeys(ACTIVITY_KEYS)


@pytest.mark.parametrize("binding", BINDINGS)
def test_per_process_sm_from_the_r550_call_leaves_a_process_without_samples_unknown(
    c_nvml: CNvml, binding: str, sleepers: list[int]
) -> None:
    """The newest binding asks ``nvmlDeviceGetProcessesUtilizationInfo`` (R550): a process
    the driver has no sample for is unknown, never 0. The oldest binding lacks the call and
    asks the older one, where a process without a sample in the window was idle (0)."""
    busy, idle, unmeasured = sleepers[:3]
    document = machine()
    document["gpus"][0]["processes"] = [
        {"pid": busy, "used_memory_mib": 100, "sm_util": 70},
        {"pid": idle, "used_memory_mib": 100, "sm_util": 0},
        {"pid": unmeasured, "used_memory_mib": 100},
    ]
    data = c_nvml.data_file("processes", document, "R550")
    gpus = c_nvml.gputop_json(
        ["snapshot", "--json"], generation="R550", binding=binding, data=data
    )["gpus"]
    sm = {p["pid"]: p["sm_util"] for p in gpus[0]["processes"]}
    if binding == NEWEST:
        assert sm == {busy: 70, idle: 0, unmeasured: None}
    else:
        assert sm == {busy: 70, idle: 0, unmeasured: 0}


def _prof_samples(text: str) -> dict[tuple[str, str, str, str], float]:
    return {
        (s.name, s.labels["gpu"], s.labels.get("GPU_I_ID", ""), s.labels.get("GPU_I_PROFILE", "")):
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("DCGM_FI_PROF_")
    }  # fmt: skip


@pytest.mark.parametrize("binding", BINDINGS)
def test_the_exporter_gives_the_drivers_figures_in_dcgm_exporters_units(
    c_nvml: CNvml, binding: str
) -> None:
    data = c_nvml.data_file("exporter", machine(), "R550")
    env = c_nvml.environment(generation="R550", binding=binding, data=data)
    args = ("--listen", "127.0.0.1:0", "--interval", "0.5")
    with running_exporter(*args, frozen_at_s=None, env=env) as exporter:

        def with_activity() -> str | None:
            text = exporter.scrape()
            return text if "DCGM_FI_PROF_SM_ACTIVE{" in text else None

        text = wait_for(with_activity, "the exporter's second GPM sample")
    prof = _prof_samples(text)
    assert prof[("DCGM_FI_PROF_SM_ACTIVE", "0", "", "")] == pytest.approx(0.615)
    assert prof[("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "0", "", "")] == pytest.approx(0.445)
    assert prof[("DCGM_FI_PROF_PCIE_TX_BYTES", "0", "", "")] == 12.5 * MIB
    assert prof[("DCGM_FI_PROF_NVLINK_TX_BYTES", "0", "", "")] == 8500 * MIB
    assert prof[("DCGM_FI_PROF_SM_ACTIVE", "2", "1", "4g.40gb")] == pytest.approx(0.885)
    assert prof[("DCGM_FI_PROF_SM_ACTIVE", "2", "2", "2g.20gb")] == pytest.approx(0.035)
    assert prof[("DCGM_FI_PROF_DRAM_ACTIVE", "2", "1", "4g.40gb")] == pytest.approx(0.35)
    assert not [key for key in prof if key[1] == "1"]  # the A100: absent, never 0
    assert ("DCGM_FI_PROF_DRAM_ACTIVE", "2", "2", "2g.20gb") not in prof  # not answered
    assert len({key for key in prof if key[0] == "DCGM_FI_PROF_SM_ACTIVE"}) == 4
