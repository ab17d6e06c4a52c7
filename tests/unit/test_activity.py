"""True activity through GPM on the simulated driver: sampling, the fake's answers, JSON.

docs/activity.md says what each figure is; these tests check that what the simulated
driver answers per GPU and MIG instance arrives unchanged, that nothing arrives where GPM is
absent, and that the sampler keeps NVML's rules (two alternating samples, 100 ms apart,
only ``numMetrics`` entries, each metric's own return and NaN).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import subprocess
import sys
from typing import Any

import pynvml
import pytest
from helpers.cuda_view import running_sleeper
from helpers.fake_nvml import make_nvml
from helpers.scenarios import minimal_gpu

from gputop.core.clock_events import reason_names
from gputop.core.errors import ScenarioError
from gputop.core.fake import FakeNvml, load_fake_nvml
from gputop.core.fake.scenario import parse_scenario
from gputop.core.model import ACTIVITY_KEYS, NO_ACTIVITY
from gputop.core.sampling.activity import MIN_INTERVAL_S, ActivitySampler, GpmTarget
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.nvml_fields import FieldReader
from gputop.core.snapshot_json import snapshot_to_json

MIB = 1024 * 1024
SIGNAL_OF = {
    "graphics_percent": "graphics",
    "sm_active_percent": "sm_active",
    "sm_occupancy_percent": "sm_occupancy",
    "tensor_active_percent": "tensor_active",
    "dram_active_percent": "dram_active",
    "fp64_percent": "fp64",
    "fp32_percent": "fp32",
    "fp16_percent": "fp16",
    "pcie_tx_bytes_per_s": "pcie_tx_mib_s",
    "pcie_rx_bytes_per_s": "pcie_rx_mib_s",
    "nvlink_rx_bytes_per_s": "nvlink_rx_mib_s",
    "nvlink_tx_bytes_per_s": "nvlink_tx_mib_s",
}
HOPPER_ACTIVITY = {
    "graphics": 91, "sm_active": 64.5, "sm_occupancy": 30, "tensor_active": 41.25,
    "dram_active": 55, "fp64": 0, "fp32": 7, "fp16": 22, "pcie_tx_mib_s": 12,
    "pcie_rx_mib_s": 40, "nvlink_rx_mib_s": 9000, "nvlink_tx_mib_s": 8000,
}  # fmt: skip
H100_MIG_UUIDS = (
    "MIG-aaaaaaaa-5b6a-4789-8a9b-0c1d2e3f4a5b",
    "MIG-bbbbbbbb-5b6a-4789-8a9b-0c1d2e3f4a5b",
    "MIG-cccccccc-5b6a-4789-8a9b-0c1d2e3f4a5b",
)


def hopper_gpu(**overrides: Any) -> dict[str, Any]:
    gpu = minimal_gpu(
        name="NVIDIA H100 80GB HBM3",
        uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000",
        cuda_compute_capability=[9, 0],
        activity=dict(HOPPER_ACTIVITY),
    )
    gpu.update(overrides)
    return gpu


def hopper_mig_gpu() -> dict[str, Any]:
    """An H100 in MIG mode: instance 1 with two compute instances, instance 2 with one."""
    return hopper_gpu(
        mig_mode=[1, 1],
        mig_devices=[
            {"uuid": H100_MIG_UUIDS[0], "gpu_instance_id": 1, "compute_instance_id": 0,
             "memory_total_mib": 40000, "multiprocessor_count": 30, "profile": "3g.40gb",
             "activity": {"sm_active": 80, "tensor_active": 60, "dram_active": 50}},
            {"uuid": H100_MIG_UUIDS[1], "gpu_instance_id": 1, "compute_instance_id": 1,
             "memory_total_mib": 40000, "multiprocessor_count": 30, "profile": "3g.40gb"},
            {"uuid": H100_MIG_UUIDS[2], "gpu_instance_id": 2, "compute_instance_id": 0,
             "memory_total_mib": 20000, "multiprocessor_count": 16, "profile": "2g.20gb",
             "activity": {"sm_active": 5, "graphics": 9}},
        ],
    )  # fmt: skip


def sampled(nvml: FakeNvml) -> dict[str, Any]:
    backend = NvmlBackend(nvml)
    try:
        backend.settle_activity()
        return snapshot_to_json(backend.sample())
    finally:
        backend.close()


def expected(signals: dict[str, float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key, name in SIGNAL_OF.items():
        value = signals.get(name)
        if value is None:
            out[key] = None
        else:
            out[key] = float(value) * (MIB if key.endswith("bytes_per_s") else 1)
    return out


def test_a_hopper_gpu_reports_what_the_driver_answers_under_exactly_the_documented_keys() -> None:
    document = sampled(make_nvml(hopper_gpu()))
    activity = document["gpus"][0]["activity"]
    assert list(activity) == list(ACTIVITY_KEYS)
    assert activity == pytest.approx(expected(HOPPER_ACTIVITY))
    assert document["gpus"][0]["clock_event_reasons"] == []


def test_the_built_in_dgx_h100_matches_its_signals_on_every_card() -> None:
    nvml = load_fake_nvml("dgx-h100", frozen_time=30.0)
    nvml.nvmlInit()
    document = sampled(nvml)
    for gpu, scenario_gpu in zip(document["gpus"], nvml.scenario.gpus, strict=True):
        signals = scenario_gpu.activity
        assert signals is not None
        for key, name in SIGNAL_OF.items():
            signal = getattr(signals, name)
            want = signal.value_at(30.0) * (MIB if key.endswith("bytes_per_s") else 1)
            assert gpu["activity"][key] == pytest.approx(max(0.0, want)), key
    # the "busy but idle" card: utilisation high, SM activity low (the point)
    last = document["gpus"][7]
    assert last["utilization_gpu"] > 80 and last["activity"]["sm_active_percent"] < 15


@pytest.mark.parametrize("name", ["v100x4", "mig", "faulty"])
def test_pre_hopper_gpus_have_no_gpm_figures_and_nothing_substituted(name: str) -> None:
    nvml = load_fake_nvml(name, frozen_time=30.0)
    nvml.nvmlInit()
    for gpu in sampled(nvml)["gpus"]:
        activity = gpu["activity"]
        gpm_keys = [k for k in ACTIVITY_KEYS if not k.startswith("pcie")]
        assert all(activity[k] is None for k in gpm_keys), gpu["name"]
        for mig in gpu["mig_devices"]:
            assert all(value is None for value in mig["activity"].values())


def test_pre_hopper_pcie_rates_come_from_the_pcie_throughput_call_in_bytes() -> None:
    gpu = minimal_gpu(pcie_tx_kbps=1200, pcie_rx_kbps=3400)
    activity = sampled(make_nvml(gpu))["gpus"][0]["activity"]
    assert activity["pcie_tx_bytes_per_s"] == 1200 * 1000
    assert activity["pcie_rx_bytes_per_s"] == 3400 * 1000
    assert activity["sm_active_percent"] is None


def test_a_hopper_gpu_does_not_pay_for_the_pcie_throughput_call() -> None:
    calls: list[str] = []
    nvml = make_nvml(hopper_gpu(pcie_tx_kbps=5, pcie_rx_kbps=6))
    original = nvml.nvmlDeviceGetPcieThroughput

    def counted(*args: Any) -> Any:
        calls.append("pcie")
        return original(*args)

    nvml.nvmlDeviceGetPcieThroughput = counted  # type: ignore[method-assign]
    backend = NvmlBackend(nvml)
    backend.sample()
    backend.close()
    assert calls == []


def test_a_driver_without_the_gpm_symbols_gives_no_activity() -> None:
    """R470 and older: nvmlGpm* are FUNCTION_NOT_FOUND."""
    nvml = make_nvml(hopper_gpu(), driver_version="470.256.02")
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlGpmQueryDeviceSupport(nvml.nvmlDeviceGetHandleByIndex(0))
    activity = sampled(nvml)["gpus"][0]["activity"]
    assert all(activity[k] is None for k in ACTIVITY_KEYS if not k.startswith("pcie"))


def test_a_vgpu_profile_without_gpm_gives_no_activity() -> None:
    gpu = hopper_gpu(function_errors={"nvmlGpmQueryDeviceSupport": "NOT_SUPPORTED"})
    activity = sampled(make_nvml(gpu))["gpus"][0]["activity"]
    assert activity["sm_active_percent"] is None


def test_the_fake_driver_refuses_samples_before_hopper() -> None:
    nvml = make_nvml(minimal_gpu())
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice == 0
    sample = nvml.nvmlGpmSampleAlloc()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlGpmSampleGet(handle, sample)
    nvml.nvmlGpmSampleFree(sample)


def test_a_metric_the_driver_fails_is_null_and_the_others_stay() -> None:
    signals = {"sm_active": 12.5, "tensor_active": 3}
    activity = sampled(make_nvml(hopper_gpu(activity=signals)))["gpus"][0]["activity"]
    assert activity["sm_active_percent"] == 12.5
    assert activity["tensor_active_percent"] == 3
    assert activity["graphics_percent"] is None and activity["dram_active_percent"] is None


def test_mig_instances_report_their_own_gpu_instance() -> None:
    document = sampled(make_nvml(hopper_mig_gpu()))
    migs = document["gpus"][0]["mig_devices"]
    assert [m["activity"]["sm_active_percent"] for m in migs] == [80, 80, 5]
    assert migs[1]["activity"] == migs[0]["activity"]  # one GPU instance, two CIs
    assert migs[2]["activity"]["graphics_percent"] == 9
    assert migs[2]["activity"]["tensor_active_percent"] is None
    assert document["gpus"][0]["activity"]["sm_active_percent"] == 64.5


def test_activity_on_a_pre_hopper_gpu_is_a_scenario_error() -> None:
    document = {"gpus": [minimal_gpu(activity={"sm_active": 10})]}
    with pytest.raises(ScenarioError, match=r"gpus\[0\]\.activity.*Hopper"):
        parse_scenario(document, "x.json")


@pytest.mark.parametrize(
    ("activity", "where"),
    [
        ({"sm_activ": 1}, r"gpus\[0\]\.activity\.sm_activ"),
        ({"sm_active": "high"}, r"gpus\[0\]\.activity\.sm_active"),
        ({"sm_active": {"base": 1, "amp": 2}}, r"sm_active\.period"),
    ],
)
def test_bad_activity_signals_are_named(activity: dict[str, Any], where: str) -> None:
    with pytest.raises(ScenarioError, match=where):
        parse_scenario({"gpus": [hopper_gpu(activity=activity)]}, "x.json")


@pytest.mark.parametrize(
    ("windows", "message"),
    [
        ([{"reasons": ["too_hot"], "until_s": 5}], "too_hot.*not a clock event reason"),
        ([{"reasons": ["sw_power_cap"], "from_s": 5, "until_s": 5}], "after from_s"),
        ([{"reasons": ["sw_power_cap"], "until_s": 10, "period_s": 5}], "at least until_s"),
        ([{"reasons": ["sw_power_cap"]}], "until_s.*required"),
    ],
)
def test_bad_clock_event_windows_are_named(windows: list[Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_scenario({"gpus": [minimal_gpu(clock_event_reasons=windows)]}, "x.json")


# -- the sampler's rules ------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_samples_alternate_are_allocated_once_and_a_quick_tick_reuses_and_says_so() -> None:
    nvml = make_nvml(hopper_gpu())
    allocations: list[Any] = []
    alloc = nvml.nvmlGpmSampleAlloc

    def counted() -> Any:
        allocations.append(1)
        return alloc()

    nvml.nvmlGpmSampleAlloc = counted  # type: ignore[method-assign]
    clock = Clock()
    sampler = ActivitySampler(nvml, FieldReader(nvml), clock)
    assert sampler.open_gpu(0, nvml.nvmlDeviceGetHandleByIndex(0))
    first = sampler.gpu(0)
    assert first.gpm and first.sm_active_percent is None  # one sample: nothing yet
    clock.now += 1.0
    second = sampler.gpu(0)
    assert second.sm_active_percent == 64.5 and not second.reused
    clock.now += MIN_INTERVAL_S / 2
    quick = sampler.gpu(0)
    assert quick.reused and quick.sm_active_percent == 64.5
    for _ in range(20):
        clock.now += 1.0
        assert sampler.gpu(0).sm_active_percent == 64.5
    assert len(allocations) == 2
    sampler.close()
    assert not nvml._gpm_buffers  # both freed


class OverrunningNvml(FakeNvml):
    """A driver that writes one entry past ``numMetrics``, as a driver built for a longer
    ``metrics`` array might."""

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        result = super().nvmlGpmMetricsGet(request)
        count = int(request.numMetrics)
        entry = type(request.metrics[0]).from_address(
            ctypes.addressof(request.metrics[0]) + count * ctypes.sizeof(request.metrics[0])
        )
        entry.metricId = 2
        entry.nvmlReturn = 0
        entry.value = 50.0
        return result


def test_a_driver_writing_past_num_metrics_is_caught_and_not_asked_again() -> None:
    scenario = parse_scenario({"gpus": [hopper_gpu()]}, "x.json")
    nvml = OverrunningNvml(scenario, frozen_time=10.0)
    nvml.nvmlInit()
    clock = Clock()
    sampler = ActivitySampler(nvml, FieldReader(nvml), clock)
    sampler.open_gpu(0, nvml.nvmlDeviceGetHandleByIndex(0))
    sampler.gpu(0)
    clock.now += 1
    assert sampler.gpu(0) == NO_ACTIVITY
    assert not sampler.supported(0)
    clock.now += 1
    assert sampler.gpu(0) == NO_ACTIVITY


def test_only_num_metrics_entries_are_asked_whatever_the_binding_array_holds() -> None:
    nvml = make_nvml(hopper_gpu())
    seen: list[tuple[int, int]] = []
    original = nvml.nvmlGpmMetricsGet

    def spy(request: Any) -> Any:
        seen.append((int(request.numMetrics), len(request.metrics)))
        return original(request)

    nvml.nvmlGpmMetricsGet = spy  # type: ignore[method-assign]
    clock = Clock()
    sampler = ActivitySampler(nvml, FieldReader(nvml), clock)
    sampler.open_gpu(0, nvml.nvmlDeviceGetHandleByIndex(0))
    sampler.gpu(0)
    clock.now += 1
    sampler.gpu(0)
    assert seen == [(len(ACTIVITY_KEYS), pynvml.NVML_GPM_METRIC_MAX)]


class NanNvml(FakeNvml):
    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        super().nvmlGpmMetricsGet(request)
        request.metrics[1].value = math.nan  # SM active
        request.metrics[3].value = -4.0  # tensor active
        request.metrics[8].value = 1e300  # PCIe TX: far past any link
        return request


def test_nan_negative_and_absurd_metrics_are_unknown() -> None:
    nvml = NanNvml(parse_scenario({"gpus": [hopper_gpu()]}, "x.json"), frozen_time=10.0)
    nvml.nvmlInit()
    activity = sampled(nvml)["gpus"][0]["activity"]
    assert activity["sm_active_percent"] is None
    assert activity["tensor_active_percent"] is None
    assert activity["pcie_tx_bytes_per_s"] is None
    assert activity["graphics_percent"] == 91
    json.dumps(activity, allow_nan=False)


def test_a_gpu_lost_while_sampling_gpm_is_marked_lost_and_the_others_go_on() -> None:
    lost = hopper_gpu(lost_after_s=5)
    other = hopper_gpu(uuid="GPU-33333333-aaaa-bbbb-cccc-000000000000",
                       pci_bus_id="00000000:08:00.0")  # fmt: skip
    nvml = make_nvml(lost, other, at=1.0)
    backend = NvmlBackend(nvml)
    backend.settle_activity()
    nvml.set_time(6.0)
    snapshot = backend.sample()
    backend.close()
    assert snapshot.gpus[0].lost
    assert snapshot.gpus[1].activity.sm_active_percent == 64.5


def test_gpm_target_survives_a_refused_sample_and_starts_again() -> None:
    nvml = make_nvml(hopper_gpu())
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    refuse = [False]

    def take(sample: Any) -> Any:
        if refuse[0]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        return nvml.nvmlGpmSampleGet(handle, sample)

    target = GpmTarget(nvml, take)
    target.read(0.0)
    assert target.read(1.0).sm_active_percent == 64.5
    refuse[0] = True
    assert target.read(2.0).sm_active_percent is None
    refuse[0] = False
    assert target.read(3.0).sm_active_percent is None  # one new sample: a pair again next
    assert target.read(4.0).sm_active_percent == 64.5
    target.close()


# -- clock event reasons ---------------------------------------------------------------------


def test_clock_event_reasons_and_how_long_the_card_has_been_throttled() -> None:
    gpu = hopper_gpu(
        clock_event_reasons=[
            {"reasons": ["sw_power_cap", "hw_slowdown"], "from_s": 10, "until_s": 20},
            {"reasons": ["gpu_idle"], "from_s": 30, "until_s": 40},
        ]
    )
    nvml = make_nvml(gpu, at=5.0)
    times = iter([1000.0, 1001.0, 1002.0, 1003.0, 1004.0])
    backend = NvmlBackend(nvml, clock=lambda: next(times))
    first = backend.sample()
    assert first.gpus[0].clock_event_mask == 0 and first.gpus[0].throttled_since is None
    nvml.set_time(12.0)
    throttled = backend.sample()
    nvml.set_time(15.0)
    still = backend.sample()
    assert reason_names(still.gpus[0].clock_event_mask or 0) == ["sw_power_cap", "hw_slowdown"]
    assert throttled.gpus[0].throttled_since == still.gpus[0].throttled_since
    assert still.timestamp - (still.gpus[0].throttled_since or 0) == 1.0
    nvml.set_time(35.0)
    idle = backend.sample()
    assert idle.gpus[0].throttled_since is None  # idle is a reason, not a throttle
    assert snapshot_to_json(idle)["gpus"][0]["clock_event_reasons"] == ["gpu_idle"]
    backend.close()


def test_drivers_before_r535_answer_through_the_throttle_reasons_call() -> None:
    gpu = minimal_gpu(clock_event_reasons=[{"reasons": ["sw_thermal_slowdown"], "until_s": 99}])
    nvml = make_nvml(gpu, driver_version="470.256.02")
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetCurrentClocksEventReasons(nvml.nvmlDeviceGetHandleByIndex(0))
    document = sampled(nvml)
    assert document["gpus"][0]["clock_event_reasons"] == ["sw_thermal_slowdown"]


def test_an_impossible_clock_event_mask_is_unknown() -> None:
    nvml = make_nvml(minimal_gpu())
    nvml.nvmlDeviceGetCurrentClocksEventReasons = lambda handle: -1  # type: ignore[method-assign]
    assert sampled(nvml)["gpus"][0]["clock_event_reasons"] is None


# -- a job's profile ---------------------------------------------------------------------------


def test_a_job_profile_sets_the_activity_of_the_card_its_process_is_pinned_to(
    tmp_path: Any,
) -> None:
    pinned_uuid = "GPU-22222222-aaaa-bbbb-cccc-000000000000"
    other = hopper_gpu(uuid="GPU-33333333-aaaa-bbbb-cccc-000000000000",
                       pci_bus_id="00000000:08:00.0")  # fmt: skip
    document = {
        "driver_version": "550.127.05",
        "job_profile": {"used_memory_mib": 100, "activity": {"sm_active": 33, "tensor_active": 7}},
        "gpus": [hopper_gpu(), other],
    }
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": pinned_uuid}
    # Sampled once it runs: read earlier, the fake finds no pinning in its environment
    job = running_sleeper(env)
    try:
        nvml = FakeNvml(parse_scenario(document, "x.json"), frozen_time=10.0)
        nvml.nvmlInit()
        gpus = sampled(nvml)["gpus"]
    finally:
        job.terminate()
        job.wait(timeout=10)
    assert gpus[0]["activity"]["sm_active_percent"] == 33
    assert gpus[0]["activity"]["tensor_active_percent"] == 7
    assert gpus[0]["activity"]["graphics_percent"] is None  # the profile's, not the card's
    assert gpus[1]["activity"]["sm_active_percent"] == 64.5


# -- the lab: a host's activity through the protocol ---------------------------------------


def test_a_hosts_activity_and_throttle_come_through_the_lab_protocol() -> None:
    from gputop.core.remote.host_values import check_snapshot
    from gputop.core.remote.protocol import snapshot_from_json

    gpu = hopper_mig_gpu()
    gpu["clock_event_reasons"] = [{"reasons": ["hw_slowdown"], "until_s": 100}]
    nvml = make_nvml(gpu, at=10.0)
    backend = NvmlBackend(nvml, clock=lambda: 2_000_000_000.0)
    backend.settle_activity()
    sent = backend.sample()
    backend.close()
    document = json.loads(json.dumps(snapshot_to_json(sent), allow_nan=False))
    received = check_snapshot(snapshot_from_json(document), 2_000_000_000.0)
    assert received.impossible == ()
    got = received.snapshot.gpus[0]
    assert got.activity == sent.gpus[0].activity
    assert [m.activity for m in got.mig_devices] == [m.activity for m in sent.gpus[0].mig_devices]
    assert got.clock_event_mask == 0x8 and got.throttled_for_s == 0.0


@pytest.mark.parametrize(
    ("figure", "value"),
    [("sm_active_percent", 250.0), ("tensor_active_percent", -1.0),
     ("pcie_tx_bytes_per_s", 1e300), ("dram_active_percent", math.nan)],
)  # fmt: skip
def test_a_hosts_impossible_figures_are_unknown_and_counted(figure: str, value: float) -> None:
    from gputop.core.remote.host_values import check_snapshot
    from gputop.core.remote.protocol import snapshot_from_json

    document = sampled(make_nvml(hopper_gpu()))
    document["gpus"][0]["activity"][figure] = value
    checked = check_snapshot(snapshot_from_json(document), document["timestamp"])
    assert getattr(checked.snapshot.gpus[0].activity, figure) is None
    assert checked.impossible == (f"gpus[0].activity.{figure}",)
    assert checked.snapshot.gpus[0].activity.graphics_percent == 91


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("activity", "busy", "gpus\\[0\\].activity is not an object"),
     ("activity", {"sm_active_percent": "high"}, "sm_active_percent is not a number"),
     ("clock_event_reasons", "sw_power_cap", "clock_event_reasons is not a list"),
     ("clock_event_reasons", [7], "clock_event_reasons\\[0\\] is not a string")],
)  # fmt: skip
def test_a_hosts_malformed_activity_is_a_protocol_error(
    field: str, value: Any, message: str
) -> None:
    from gputop.core.remote.protocol import ProtocolError, snapshot_from_json

    document = sampled(make_nvml(hopper_gpu()))
    document["gpus"][0][field] = value
    with pytest.raises(ProtocolError, match=message):
        snapshot_from_json(document)


def test_reasons_a_newer_host_names_are_left_out_not_an_error() -> None:
    from gputop.core.remote.protocol import snapshot_from_json

    document = sampled(make_nvml(hopper_gpu()))
    document["gpus"][0]["clock_event_reasons"] = ["sw_power_cap", "from_the_future", "bit_40"]
    assert snapshot_from_json(document).gpus[0].clock_event_mask == 0x4 | 1 << 40


def test_snapshot_text_shows_activity_and_throttling_on_hopper_only() -> None:
    from gputop.cli.snapshot_text import render_snapshot
    from gputop.core.sampling.source import open_backend

    def lines(name: str) -> list[str]:
        backend = open_backend(name, environ={"GPUTOP_FAKE_TIME": "30"})
        try:
            text = render_snapshot(backend.sample())
        finally:
            backend.close()
        return [line for line in text.splitlines() if line.startswith("[")]

    hopper = lines("dgx-h100")
    assert hopper[7].endswith("P0  SM 8% TC 1% DRAM 1%")
    assert hopper[3].endswith("throttled: power cap")
    assert all("SM" not in line and "throttled" not in line for line in lines("v100x4"))


def test_a_hostile_mig_profile_is_a_cleaned_bounded_label() -> None:
    from helpers.exporter import samples

    from gputop.core.exporter.collector import SnapshotCollector

    gpu = hopper_mig_gpu()
    gpu["mig_devices"][0]["profile"] = "3g\x1b[2J\u202e" + "x" * 500
    nvml = make_nvml(gpu)
    backend = NvmlBackend(nvml)
    backend.settle_activity()
    collector = SnapshotCollector()
    collector.record(backend.sample(), 0.01)
    backend.close()
    profiles = {s.labels["GPU_I_PROFILE"] for s in samples(collector, "DCGM_FI_PROF_SM_ACTIVE")}
    hostile = next(p for p in profiles if p.startswith("3g"))
    assert "\x1b" not in hostile and "\u202e" not in hostile and len(hostile) <= 128
    assert profiles == {"", hostile, "2g.20gb"}


def _watch_lines(scenario: str, count: int) -> tuple[list[dict[str, Any]], str]:
    """``count`` documents of ``snapshot --watch 0.1 --json`` and what it said on stderr."""

    env = {**os.environ, "GPUTOP_FAKE_TIME": "30"}
    watch = subprocess.Popen(
        [sys.executable, "-m", "gputop", "snapshot", "--fake", scenario, "--watch", "0.1",
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert watch.stdout is not None
        documents = [json.loads(watch.stdout.readline()) for _ in range(count)]
    finally:
        watch.terminate()
        _, err = watch.communicate(timeout=20)
    return documents, err


def test_a_watch_quicker_than_gpm_allows_says_that_figures_repeat() -> None:
    documents, said = _watch_lines("dgx-h100", 4)
    assert "repeat the previous sample's" in said
    figures = {d["gpus"][7]["activity"]["sm_active_percent"] for d in documents}
    assert None not in figures  # repeated, never dropped
    _, said = _watch_lines("v100x4", 2)
    assert "repeat" not in said  # no GPM there: nothing to say
