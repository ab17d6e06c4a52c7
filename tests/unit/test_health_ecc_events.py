"""ECC events (issue 42): on an ECC board the sampler's event set hears of single- and
double-bit ECC errors too, so an uncorrectable error shows at the next sample rather than
at the next reading of the counters (every 10 s); a GeForce card has no ECC events (NOT
SUPPORTED for those types only) and its Xids still arrive. docs/health.md."""

from __future__ import annotations

import time
from collections.abc import Callable

import pynvml
import pytest
from helpers.scenarios import minimal_gpu
from helpers.waiting import wait_for

from gputop.core.fake import FakeNvml, load_scenario
from gputop.core.fake.base import FakeDeviceHandle
from gputop.core.fake.health_calls import DOUBLE_BIT_ECC, SINGLE_BIT_ECC, XID_CRITICAL_ERROR
from gputop.core.model import GpuHealth
from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions

WriteScenario = Callable[..., str]
GEFORCE = {"name": "NVIDIA GeForce RTX 4090", "cuda_compute_capability": [8, 9]}


def open_scenario(path: str) -> tuple[FakeNvml, NvmlBackend]:
    nvml = FakeNvml(load_scenario(path), frozen_time=30.0)
    nvml.nvmlInit()
    backend = NvmlBackend(nvml, clock=nvml.epoch_time, options=SamplingOptions(claims=False))
    return nvml, backend


def health(backend: NvmlBackend, index: int) -> GpuHealth:
    found = backend.sample().gpus[index].health
    assert found is not None
    return found


def test_an_uncorrectable_error_shows_at_the_next_sample_not_the_next_reading(
    scenario_file: WriteScenario,
) -> None:
    path = scenario_file([minimal_gpu(ecc_uncorrected_volatile=0)])
    nvml, backend = open_scenario(path)
    try:
        first = health(backend, 0)
        assert first.ecc is not None and first.ecc.uncorrected_volatile == 0
        nvml.inject_ecc_error(0, uncorrectable=True)  # the clock stands still: no period passes
        now = wait_for(
            lambda: (h := health(backend, 0)).ecc and h.ecc.uncorrected_volatile == 1 and h,
            "the uncorrectable error counted",
        )
        assert now.ecc is not None and now.ecc.uncorrected_aggregate == 1
        assert now.read_at == first.read_at  # read again now, at the same (frozen) time
        nvml.inject_ecc_error(0, uncorrectable=False)
        wait_for(
            lambda: (h := health(backend, 0)).ecc and h.ecc.corrected_volatile == 1,
            "the corrected error counted",
        )
    finally:
        backend.close()


def test_a_geforce_has_no_ecc_events_and_its_xids_still_arrive(
    scenario_file: WriteScenario,
) -> None:
    path = scenario_file([minimal_gpu(**GEFORCE)])
    nvml, backend = open_scenario(path)
    try:
        assert health(backend, 0).xid_events == ()  # an Xid source, and no Xid yet
        nvml.inject_xid(0, 43)
        wait_for(lambda: [e.xid for e in health(backend, 0).xid_events or ()] == [43], "Xid 43")
    finally:
        backend.close()


def test_the_fake_answers_ecc_event_types_by_card_kind(scenario_file: WriteScenario) -> None:
    path = scenario_file(
        [
            minimal_gpu(**GEFORCE),
            minimal_gpu(
                uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000",
                pci_bus_id="00000000:08:00.0",
                ecc_uncorrected_volatile=0,
            ),
        ]
    )
    nvml = FakeNvml(load_scenario(path), frozen_time=30.0)
    nvml.nvmlInit()
    geforce, a100 = FakeDeviceHandle(0), FakeDeviceHandle(1)
    ecc = SINGLE_BIT_ECC | DOUBLE_BIT_ECC
    assert nvml.nvmlDeviceGetSupportedEventTypes(geforce) == XID_CRITICAL_ERROR
    assert nvml.nvmlDeviceGetSupportedEventTypes(a100) == XID_CRITICAL_ERROR | ecc
    event_set = nvml.nvmlEventSetCreate()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceRegisterEvents(geforce, ecc, event_set)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # one type it lacks: none registered
        nvml.nvmlDeviceRegisterEvents(geforce, ecc | XID_CRITICAL_ERROR, event_set)
    nvml.nvmlDeviceRegisterEvents(geforce, XID_CRITICAL_ERROR, event_set)
    nvml.nvmlDeviceRegisterEvents(a100, ecc, event_set)
    nvml.inject_ecc_error(1, uncorrectable=True)
    event = nvml.nvmlEventSetWait_v2(event_set, 1000)
    assert (event.device, event.eventType) == (a100, DOUBLE_BIT_ECC)
    nvml.inject_xid(1, 79)  # the A100 is registered for ECC only: its Xid is not delivered
    nvml.inject_xid(0, 13)
    event = nvml.nvmlEventSetWait_v2(event_set, 1000)
    assert (event.device, event.eventType, event.eventData) == (geforce, XID_CRITICAL_ERROR, 13)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.inject_ecc_error(0, uncorrectable=True)
    nvml.nvmlEventSetFree(event_set)


def test_a_scenario_xid_falling_due_mid_wait_ends_the_wait_when_due(
    scenario_file: WriteScenario,
) -> None:
    """The fake's wait holds until the next scenario Xid is due, not to its whole timeout: the
    sampler's thread waits seconds at a time, and an Xid is not to arrive those seconds late."""
    path = scenario_file([minimal_gpu(xid_events=[{"at_s": 0.4, "xid": 48}])])
    nvml = FakeNvml(load_scenario(path), speed=1.0)  # a running clock
    nvml.nvmlInit()
    event_set = nvml.nvmlEventSetCreate()
    nvml.nvmlDeviceRegisterEvents(FakeDeviceHandle(0), XID_CRITICAL_ERROR, event_set)
    started = time.monotonic()
    event = nvml.nvmlEventSetWait_v2(event_set, 5000)
    waited = time.monotonic() - started
    assert event.eventData == 48
    assert nvml.now() >= 0.4  # not before it is due
    assert waited < 2.5, f"delivered {waited:.2f} s into a 5 s wait, due at 0.4 s"
    nvml.nvmlEventSetFree(event_set)


def test_on_a_frozen_clock_a_later_scenario_xid_never_comes_and_the_wait_times_out(
    scenario_file: WriteScenario,
) -> None:
    path = scenario_file([minimal_gpu(xid_events=[{"at_s": 60, "xid": 48}])])
    nvml = FakeNvml(load_scenario(path), frozen_time=30.0)
    nvml.nvmlInit()
    event_set = nvml.nvmlEventSetCreate()
    nvml.nvmlDeviceRegisterEvents(FakeDeviceHandle(0), XID_CRITICAL_ERROR, event_set)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait_v2(event_set, 50)
    nvml.nvmlEventSetFree(event_set)
