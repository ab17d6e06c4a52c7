"""GPU health (issue 42): the readings per card kind, the cadence, refusals, Xid events and
the verdict, on the Python fake through the same backend as on a real driver."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from helpers.scenarios import minimal_gpu
from helpers.waiting import wait_for

from gputop.core.fake import FakeNvml, load_scenario, resolve_scenario_path
from gputop.core.health import badge, verdict
from gputop.core.model import (
    EccCounts,
    GpuHealth,
    GpuSample,
    RemappedRows,
    RetiredPages,
    XidEvent,
)
from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions
from gputop.core.sampling.nvml_health import HEALTH_PERIOD_S
from gputop.core.xid import CATALOGUE, UNKNOWN_XID, describe

OpenFake = Callable[..., NvmlBackend]
WriteScenario = Callable[..., str]
V100 = {"name": "Tesla V100-SXM2-16GB", "cuda_compute_capability": [7, 0]}
GEFORCE = {"name": "NVIDIA GeForce RTX 4090", "cuda_compute_capability": [8, 9]}


def open_scenario(path: str, at_s: float = 30.0) -> tuple[FakeNvml, NvmlBackend]:
    nvml = FakeNvml(load_scenario(path), frozen_time=at_s)
    nvml.nvmlInit()
    backend = NvmlBackend(nvml, clock=nvml.epoch_time, options=SamplingOptions(claims=False))
    return nvml, backend


def test_each_card_kind_answers_its_own_signals(fake_backend: OpenFake) -> None:
    v100 = fake_backend("v100x4").sample().gpus[0].health
    assert v100 is not None
    assert v100.retired_pages == RetiredPages(single_bit=0, double_bit=0, pending=False)
    assert v100.remapped_rows is None
    assert v100.ecc == EccCounts(0, 0, 0, 0)
    assert v100.nvlink_crc_errors == 0  # six active links, no errors
    h100 = fake_backend("dgx-h100").sample().gpus[0].health
    assert h100 is not None
    assert h100.remapped_rows == RemappedRows(0, 0, pending=False, failed=False)
    assert h100.retired_pages is None
    demo = fake_backend("demo").sample().gpus
    geforce = demo[2].health
    assert demo[2].name == "NVIDIA GeForce RTX 4090"
    assert geforce is not None
    assert geforce.ecc is None and geforce.retired_pages is None
    assert geforce.remapped_rows is None
    assert geforce.nvlink_crc_errors is None  # no NVLink: unknown, not 0
    assert geforce.pcie_replays == 0


def test_every_shipped_healthy_scenario_stays_ok(fake_backend: OpenFake) -> None:
    for name in ("demo", "v100x4", "dgx-h100", "mixed", "mig"):
        for gpu in fake_backend(name).sample().gpus:
            assert verdict(gpu.health).level == "ok", (name, gpu.physical_index, gpu.health)


def test_counts_come_from_the_scenario(scenario_file: WriteScenario) -> None:
    path = scenario_file(
        [
            minimal_gpu(
                ecc_uncorrected_volatile=2,
                ecc_corrected_volatile=7,
                ecc_corrected_aggregate=40,
                ecc_uncorrected_aggregate=3,
                remapped_rows={"correctable": 5, "uncorrectable": 1, "pending": True},
                pcie_replays=12,
                nvlink_count=12,
                nvlink_crc_errors=25,
            ),
            minimal_gpu(
                **V100,
                uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000",
                pci_bus_id="00000000:08:00.0",
                ecc_uncorrected_volatile=0,
                retired_pages={"single_bit": 2, "double_bit": 1, "pending": True},
            ),
        ]
    )
    _, backend = open_scenario(path)
    a100, v100 = (gpu.health for gpu in backend.sample().gpus)
    assert a100 is not None and v100 is not None
    assert a100.ecc == EccCounts(7, 2, 40, 3)
    assert a100.remapped_rows == RemappedRows(5, 1, pending=True, failed=False)
    assert a100.pcie_replays == 12
    assert a100.nvlink_crc_errors == 25  # summed over the twelve links
    assert v100.retired_pages == RetiredPages(2, 1, pending=True)
    backend.close()


def test_a_scenario_that_gives_a_card_the_wrong_kind_of_repair_is_refused(
    scenario_file: WriteScenario,
) -> None:
    from gputop.core.errors import ScenarioError

    with pytest.raises(ScenarioError, match="before Ampere"):
        load_scenario(scenario_file([minimal_gpu(ecc_uncorrected_volatile=0, retired_pages={})]))
    with pytest.raises(ScenarioError, match="Ampere and newer"):
        load_scenario(
            scenario_file([minimal_gpu(**V100, ecc_uncorrected_volatile=0, remapped_rows={})])
        )
    with pytest.raises(ScenarioError, match="ECC board"):
        load_scenario(scenario_file([minimal_gpu(**GEFORCE, ecc_corrected_volatile=1)]))


def test_counters_are_read_again_only_after_the_period(scenario_file: WriteScenario) -> None:
    path = scenario_file([minimal_gpu(ecc_uncorrected_volatile=0, nvlink_count=12)])
    nvml, backend = open_scenario(path)
    calls: list[str] = []
    original = nvml.nvmlDeviceGetNvLinkErrorCounter

    def counted(*args: object) -> int:
        calls.append("crc")
        return original(*args)

    nvml.nvmlDeviceGetNvLinkErrorCounter = counted  # type: ignore[method-assign]
    first = backend.sample().gpus[0].health
    assert len(calls) == 12
    nvml.set_time(30.0 + HEALTH_PERIOD_S / 2)
    second = backend.sample().gpus[0].health
    assert len(calls) == 12  # not read again within the period
    assert second is not None and first is not None and second.read_at == first.read_at
    nvml.set_time(30.0 + HEALTH_PERIOD_S)
    backend.sample()
    assert len(calls) == 24
    backend.close()


def test_a_refused_call_is_named_once_and_not_asked_again(scenario_file: WriteScenario) -> None:
    path = scenario_file(
        [minimal_gpu(ecc_uncorrected_volatile=0, no_permission=["nvmlDeviceGetRemappedRows"])]
    )
    nvml, backend = open_scenario(path)
    health = backend.sample().gpus[0].health
    assert health is not None
    assert health.remapped_rows is None
    assert health.refused == ("nvmlDeviceGetRemappedRows",)
    assert health.ecc == EccCounts(0, 0, 0, 0)
    nvml.set_time(30.0 + HEALTH_PERIOD_S)
    again = backend.sample().gpus[0].health
    assert again is not None and again.refused == ("nvmlDeviceGetRemappedRows",)
    backend.close()


def test_an_xid_from_the_scenario_and_an_injected_one_reach_the_card(
    scenario_file: WriteScenario,
) -> None:
    path = scenario_file([minimal_gpu(xid_events=[{"at_s": 10, "xid": 79}])])
    nvml, backend = open_scenario(path, at_s=5.0)
    health = backend.sample().gpus[0].health
    assert health is not None and health.xid_events == ()  # a source, and no Xid yet
    nvml.set_time(10.0)
    health = wait_for(lambda: xids(backend) == [79] and health_of(backend), "Xid 79")
    nvml.inject_xid(0, 13)
    health = wait_for(lambda: xids(backend) == [79, 13] and health_of(backend), "Xid 13")
    assert health.xid_counts == ((13, 1), (79, 1))
    assert verdict(health).level == "critical"
    assert badge(verdict(health)) == "✖ Xid 79 fell off the bus (+1)"
    backend.close()


def test_a_steady_cards_health_is_the_same_object_until_an_xid_or_a_reading_moves_it(
    scenario_file: WriteScenario,
) -> None:
    """The health of a card whose counters and Xids stand still is given again as it was
    (eight cards' health was made anew every second); an Xid, a refusal or the period's new
    reading each makes a new one at once."""
    path = scenario_file([minimal_gpu(ecc_uncorrected_volatile=0)])
    nvml, backend = open_scenario(path)
    first = health_of(backend)
    nvml.set_time(31.0)
    assert health_of(backend) is first
    nvml.inject_xid(0, 43)
    with_xid = wait_for(lambda: xids(backend) == [43] and health_of(backend), "Xid 43")
    assert with_xid is not first and with_xid.xid_counts == ((43, 1),)
    nvml.set_time(32.0)
    assert health_of(backend) is with_xid
    nvml.set_time(30.0 + HEALTH_PERIOD_S)
    reread = health_of(backend)
    assert reread is not with_xid and reread.read_at != with_xid.read_at
    assert reread.xid_counts == ((43, 1),)
    backend.close()


def health_of(backend: NvmlBackend) -> GpuHealth:
    health = backend.sample().gpus[0].health
    assert health is not None
    return health


def xids(backend: NvmlBackend) -> list[int]:
    return [e.xid for e in health_of(backend).xid_events or ()]


def test_a_storm_is_counted_exactly_and_kept_coalesced(scenario_file: WriteScenario) -> None:
    path = scenario_file([minimal_gpu(xid_events=[{"at_s": 1, "xid": 13, "count": 10000}])])
    nvml, backend = open_scenario(path)
    wait_for(lambda: health_of(backend).xid_counts == ((13, 10000),), "the storm counted")
    nvml.inject_xid(0, 31)
    nvml.inject_xid(0, 13, count=5)
    health = wait_for(
        lambda: health_of(backend).xid_counts == ((13, 10005), (31, 1)) and health_of(backend),
        "every Xid counted",
    )
    assert health.xid_events is not None
    assert [(e.xid, e.count) for e in health.xid_events] == [(13, 10000), (31, 1), (13, 5)]
    backend.close()


def test_without_an_event_source_xids_are_unknown_not_none(scenario_file: WriteScenario) -> None:
    path = scenario_file([minimal_gpu()], missing_functions=["nvmlEventSetCreate"])
    _, backend = open_scenario(path)
    health = backend.sample().gpus[0].health
    assert health is not None and health.xid_events is None
    backend.close()


def test_the_verdict_names_each_reason_and_its_action() -> None:
    assert verdict(GpuHealth()).level == "ok"
    assert verdict(None).level == "ok"
    pending = verdict(GpuHealth(remapped_rows=RemappedRows(1, 0, pending=True, failed=False)))
    assert pending.level == "warning"
    assert pending.reasons[0].text == "row remap pending"
    assert pending.action == "reset the GPU when it is idle"
    assert badge(pending) == "⚠ row remap pending: reset"
    failing = verdict(
        GpuHealth(
            ecc=EccCounts(0, 3, 0, 3),
            remapped_rows=RemappedRows(0, 2, pending=True, failed=True),
            retired_pages=None,
        )
    )
    assert failing.level == "critical"
    assert [r.text for r in failing.reasons] == [
        "row remapping failed",
        "3 uncorrectable ECC errors this boot",
        "row remap pending",
    ]
    assert "may be wrong" in failing.reasons[1].action
    pages = verdict(GpuHealth(retired_pages=RetiredPages(0, 1, pending=True)))
    assert pages.level == "warning" and pages.action == "reset the GPU, then watch it"
    app = verdict(GpuHealth(xid_events=(XidEvent(13, 1.0, count=4),)))
    assert app.level == "warning"
    assert app.reasons[0].text == "Xid 13 graphics engine exception (4x)"


def test_the_catalogue_has_the_codes_people_meet_and_unknown_is_unknown() -> None:
    for code in (
        13,
        31,
        32,
        38,
        43,
        45,
        48,
        61,
        62,
        63,
        64,
        68,
        69,
        74,
        79,
        92,
        94,
        95,
        109,
        119,
        120,
        140,
    ):
        info = CATALOGUE[code]
        assert info.meaning and info.action and info.short
    assert describe(79).severity == "critical"
    assert describe(13).severity == "warning"
    unknown = describe(UNKNOWN_XID)
    assert unknown.short == "unknown" and "could not name" in unknown.meaning
    assert describe(4242).short == "unknown"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    from gputop.cli.main import main

    code = main(list(argv))
    return code, capsys.readouterr().out


def test_snapshot_json_has_a_health_object_per_gpu(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "2")
    code, out = run_cli(capsys, "snapshot", "--json", "--fake", "faulty")
    assert code == 0
    geforce, p100, a40 = (gpu["health"] for gpu in json.loads(out)["gpus"])
    assert geforce["ecc_errors"] is None and geforce["retired_pages"] is None
    assert geforce["remapped_rows"] is None and geforce["nvlink_crc_errors"] is None
    assert geforce["verdict"] == "ok" and geforce["reasons"] == []
    assert p100["ecc_errors"] == {
        "corrected_volatile": 14,
        "uncorrected_volatile": 0,
        "corrected_aggregate": 230,
        "uncorrected_aggregate": 0,
    }
    assert p100["retired_pages"] == {"single_bit": 2, "double_bit": 0, "pending": True}
    assert p100["verdict"] == "warning"
    assert a40["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 1,
        "pending": True,
        "failed": False,
    }
    assert a40["verdict"] == "critical"
    assert [r["reason"] for r in a40["reasons"]] == [
        "Xid 48 uncorrectable ECC error",
        "2 uncorrectable ECC errors this boot",
        "row remap pending",
    ]
    (event,) = a40["xid_events"]
    assert event["xid"] == 48 and "double-bit" in event["meaning"] and event["action"]
    assert set(a40) >= {
        "ecc_errors",
        "retired_pages",
        "remapped_rows",
        "pcie_replays",
        "nvlink_crc_errors",
        "xid_events",
        "verdict",
        "reasons",
    }


def test_a_lost_card_keeps_its_last_health_and_the_xid_that_came_with_the_loss(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "4")
    nvml = FakeNvml(load_scenario(resolve_scenario_path("faulty")), frozen_time=4.0)
    nvml.nvmlInit()
    backend = NvmlBackend(nvml, clock=nvml.epoch_time, options=SamplingOptions(claims=False))
    backend.sample()
    nvml.set_time(6.0)

    def lost_with_79() -> GpuSample | None:
        gpu = backend.sample().gpus[2]
        health = gpu.health
        return gpu if gpu.lost and health and 79 in dict(health.xid_counts) else None

    a40 = wait_for(lost_with_79, "the A40 lost, with its Xid 79")
    assert a40.health is not None
    assert [e.xid for e in a40.health.xid_events or ()] == [48, 79]
    assert verdict(a40.health).reasons[0].text == "Xid 79 fell off the bus"
    assert badge(verdict(a40.health)) == "✖ Xid 79 fell off the bus (+3)"
    backend.close()


def test_the_text_snapshot_adds_a_line_for_each_card_that_is_not_ok(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "2")
    _, out = run_cli(capsys, "snapshot", "--fake", "faulty")
    health = [line.strip() for line in out.splitlines() if " health " in line]
    assert health == [
        "⚠ health warning: retired pages pending; Xid 63 memory repair recorded. "
        "Reset the GPU, then watch it",
        "✖ health critical: Xid 48 uncorrectable ECC error; 2 uncorrectable ECC errors this "
        "boot; row remap pending. Rerun the jobs that ran on it; reset the GPU so the memory is "
        "repaired; replace the board if it happens again",
    ]
    _, healthy = run_cli(capsys, "snapshot", "--fake", "dgx-h100")
    assert " health " not in healthy


def test_a_hosts_health_is_checked_and_bounded_when_read_back(fake_backend: OpenFake) -> None:
    from gputop.core.remote.protocol import ProtocolError, snapshot_from_json
    from gputop.core.snapshot_json import snapshot_to_json

    document = snapshot_to_json(fake_backend("faulty", at_s=2.0).sample())
    health = document["gpus"][2]["health"]
    health["xid_events"] = [{"xid": 13, "time": 1.0, "count": 1}] * 10_000
    health["reasons"] = [{"level": "ok", "reason": "\x1b]0;owned\x07", "action": "rm -rf"}]
    gpu = snapshot_from_json(document).gpus[2]
    assert gpu.health is not None and len(gpu.health.xid_events or ()) == 64
    assert "owned" not in json.dumps(snapshot_to_json(snapshot_from_json(document)))
    health["pcie_replays"] = -1
    with pytest.raises(ProtocolError, match=r"gpus\[2\]\.health\.pcie_replays is out of range"):
        snapshot_from_json(document)


def test_docs_health_lists_every_catalogue_code_with_its_words() -> None:
    from helpers import REPO

    text = (REPO / "docs" / "health.md").read_text(encoding="utf-8")
    for code, info in CATALOGUE.items():
        assert f"| {code} | {info.short} | {info.meaning} | {info.action} | {info.severity} |" in (
            text
        ), code


def test_a_process_on_a_card_that_had_an_xid_since_it_started_is_marked(
    scenario_file: WriteScenario,
) -> None:
    from gputop.cli.snapshot_text import render_snapshot
    from gputop.core.health import xids_since
    from gputop.core.sampling.source import open_backend
    from gputop.core.snapshot_json import snapshot_to_json

    process = {"pid": 4400001, "used_memory_mib": 10, "user": "ann", "cmd": ["python", "a.py"]}
    path = scenario_file(
        [
            minimal_gpu(
                processes=[
                    {**process, "started_s_ago": 100},
                    {**process, "pid": 4400002, "cmd": ["python", "b.py"]},  # start unknown
                ],
                xid_events=[{"at_s": 5, "xid": 31}],
            )
        ]
    )
    backend = open_backend(path, environ={"GPUTOP_FAKE_TIME": "10"})
    snapshot = backend.sample()
    processes = {p["pid"]: p for p in snapshot_to_json(snapshot)["gpus"][0]["processes"]}
    assert processes[4400001]["xids_since_start"] == [31]
    assert processes[4400002]["xids_since_start"] is None  # cannot be known
    text = render_snapshot(snapshot)
    assert "[Xid 31] python a.py" in text and "] python b.py" not in text
    backend.close()
    # simulated processes all start before the scenario's t=0: a later start, by hand
    health = GpuHealth(xid_events=(XidEvent(31, 100.0), XidEvent(13, 200.0), XidEvent(31, 300.0)))
    assert xids_since(health, 150.0) == (13, 31)
    assert xids_since(health, 400.0) == ()
    assert xids_since(GpuHealth(), 150.0) is None  # no Xid source
