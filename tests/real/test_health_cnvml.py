"""GPU health (issue 42) through the real nvidia-ml-py on the C NVML, for each card kind.

``gputop snapshot --json`` runs without ``--fake`` on each driver generation's library (and
the oldest allowed binding on the newest generation); its ``health`` objects must be the
Python fake's for the same scenario at the same time, since both answer from the same
``health_answers`` (docs/c-nvml.md). An Xid appended to the injection file while gputop runs
reaches the card through the event set.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from cnvml.build import GENERATIONS, REPO
from cnvml.fixtures import NEWEST, OLDEST, CNvml
from helpers.scenarios import minimal_gpu

from gputop.core.fake import FakeNvml, load_scenario
from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions
from gputop.core.snapshot_json import snapshot_to_json

AT_S = 30.0


def machine() -> dict[str, Any]:
    """A V100 that retires pages, an A100 with a row remap pending, a GeForce card without
    ECC, and an H100 whose links count CRC errors."""
    return {
        "description": "one card of each kind",
        "gpus": [
            minimal_gpu(
                name="Tesla V100-SXM2-16GB",
                uuid="GPU-10000000-0000-4000-8000-000000000000",
                pci_bus_id="00000000:07:00.0",
                cuda_compute_capability=[7, 0],
                ecc_uncorrected_volatile=0,
                ecc_corrected_volatile=3,
                retired_pages={"single_bit": 2, "double_bit": 1, "pending": True},
                pcie_replays=4,
            ),
            minimal_gpu(
                uuid="GPU-20000000-0000-4000-8000-000000000000",
                pci_bus_id="00000000:08:00.0",
                ecc_uncorrected_volatile=2,
                ecc_uncorrected_aggregate=5,
                remapped_rows={"correctable": 1, "uncorrectable": 2, "pending": True},
                xid_events=[{"at_s": 1, "xid": 48}, {"at_s": 2, "xid": 13, "count": 3}],
            ),
            minimal_gpu(
                name="NVIDIA GeForce RTX 4090",
                uuid="GPU-30000000-0000-4000-8000-000000000000",
                pci_bus_id="00000000:09:00.0",
                cuda_compute_capability=[8, 9],
            ),
            minimal_gpu(
                name="NVIDIA H100 80GB HBM3",
                uuid="GPU-40000000-0000-4000-8000-000000000000",
                pci_bus_id="00000000:0A:00.0",
                cuda_compute_capability=[9, 0],
                ecc_uncorrected_volatile=0,
                nvlink_count=18,
                nvlink_crc_errors=40,
            ),
        ],
    }


def fake_health(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "machine.json"
    path.write_text(json.dumps(machine()), encoding="utf-8")
    nvml = FakeNvml(load_scenario(path), frozen_time=AT_S)
    nvml.nvmlInit()
    backend = NvmlBackend(nvml, clock=nvml.epoch_time, options=SamplingOptions(claims=False))
    try:
        return [gpu["health"] for gpu in snapshot_to_json(backend.sample())["gpus"]]
    finally:
        backend.close()


def comparable(health: dict[str, Any]) -> dict[str, Any]:
    """Without the times (the fake's clock is frozen, the C NVML's run is real)."""
    events = health["xid_events"]
    return {
        **{k: v for k, v in health.items() if k != "read_at"},
        "xid_events": None
        if events is None
        else [{k: v for k, v in event.items() if k != "time"} for event in events],
    }


@pytest.mark.parametrize(
    ("generation", "binding"),
    [(g.name, NEWEST) for g in GENERATIONS] + [(GENERATIONS[-1].name, OLDEST)],
)
def test_each_card_kind_answers_as_the_fake_does(
    c_nvml: CNvml, tmp_path: Path, generation: str, binding: str
) -> None:
    data = c_nvml.data_file("health", machine(), generation, t=AT_S)
    document = c_nvml.gputop_json(
        ["snapshot", "--json"], generation=generation, binding=binding, data=data
    )
    real = [gpu["health"] for gpu in document["gpus"]]
    v100, a100, geforce, h100 = real
    assert v100["retired_pages"] == {"single_bit": 2, "double_bit": 1, "pending": True}
    assert v100["remapped_rows"] is None and v100["pcie_replays"] == 4
    assert a100["remapped_rows"] == {
        "correctable": 1,
        "uncorrectable": 2,
        "pending": True,
        "failed": False,
    }
    assert a100["retired_pages"] is None and a100["verdict"] == "critical"
    assert [(e["xid"], e["count"]) for e in a100["xid_events"]] == [(48, 1), (13, 3)]
    assert geforce["ecc_errors"] is None and geforce["retired_pages"] is None
    assert geforce["remapped_rows"] is None and geforce["verdict"] == "ok"
    assert h100["nvlink_crc_errors"] == 40
    assert [comparable(h) for h in real] == [comparable(h) for h in fake_health(tmp_path)]


INJECTING = textwrap.dedent(
    """
    import json, os, sys, time
    import pynvml
    from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions
    pynvml.nvmlInit()
    backend = NvmlBackend(pynvml, options=SamplingOptions(claims=False, driver_probe=False))
    first = backend.sample().gpus[1].health
    with open(os.environ["GPUTOP_CNVML_XID"], "a") as inject:
        inject.write("1 79\\n" + "2 13\\n" * 5000)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the Xid thread counts them as they come
        gpus = backend.sample().gpus
        storm = dict(gpus[2].health.xid_counts).get(13)
        if storm == 5000 and 79 in dict(gpus[1].health.xid_counts):
            break
        time.sleep(0.05)
    backend.close()
    print(json.dumps({
        "before": [e.xid for e in first.xid_events],
        "a100": [[e.xid, e.count] for e in gpus[1].health.xid_events],
        "geforce": [list(c) for c in gpus[2].health.xid_counts],
    }))
    """
)


def test_an_xid_injected_while_gputop_runs_arrives_and_a_storm_is_counted(
    c_nvml: CNvml, tmp_path: Path
) -> None:
    generation = GENERATIONS[-1].name
    data = c_nvml.data_file("health", machine(), generation, t=AT_S)
    inject = tmp_path / "xid"
    inject.write_text("", encoding="utf-8")
    env = c_nvml.environment(generation=generation, binding=NEWEST, data=data)
    env["GPUTOP_CNVML_XID"] = str(inject)
    result = subprocess.run(
        [sys.executable, "-c", INJECTING],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["before"] == [48, 13]
    assert seen["a100"] == [[48, 1], [13, 3], [79, 1]]
    assert seen["geforce"] == [[13, 5000]]


ECC_EVENTS = textwrap.dedent(
    """
    import json, os, time
    import pynvml
    from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions
    pynvml.nvmlInit()
    ecc = pynvml.nvmlEventTypeSingleBitEccError | pynvml.nvmlEventTypeDoubleBitEccError
    xid = pynvml.nvmlEventTypeXidCriticalError
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(4)]
    supported = [pynvml.nvmlDeviceGetSupportedEventTypes(h) for h in handles]
    event_set = pynvml.nvmlEventSetCreate()
    refused = []
    for types in (ecc, ecc | xid):
        try:
            pynvml.nvmlDeviceRegisterEvents(handles[2], types, event_set)
        except pynvml.NVMLError_NotSupported:
            refused.append(types)
    pynvml.nvmlDeviceRegisterEvents(handles[2], xid, event_set)
    pynvml.nvmlEventSetFree(event_set)
    backend = NvmlBackend(pynvml, options=SamplingOptions(claims=False, driver_probe=False))
    before = backend.sample().gpus[1].health.ecc.uncorrected_volatile
    with open(os.environ["GPUTOP_CNVML_XID"], "a") as inject:
        inject.write("1 dbe\\n2 43\\n")
    started = time.monotonic()
    while time.monotonic() - started < 60:
        gpus = backend.sample().gpus
        if gpus[1].health.ecc.uncorrected_volatile != before and gpus[2].health.xid_counts:
            break
        time.sleep(0.05)
    took = time.monotonic() - started
    backend.close()
    print(json.dumps({
        "supported": supported, "refused": refused, "ecc": ecc, "xid": xid,
        "before": before, "after": gpus[1].health.ecc.uncorrected_volatile,
        "geforce": [list(c) for c in gpus[2].health.xid_counts], "took": took,
    }))
    """
)


def test_ecc_events_are_registered_where_the_card_has_them_and_count_at_once(
    c_nvml: CNvml, tmp_path: Path
) -> None:
    """The V100, A100 and H100 have the ECC event types, the GeForce only the Xid's (its
    ECC registration NOT_SUPPORTED, its Xids still arrive); a double-bit error injected while
    gputop runs shows in the A100's count before the counters' 10 s period (HEALTH_PERIOD_S)."""
    from gputop.core.sampling.nvml_health import HEALTH_PERIOD_S

    generation = GENERATIONS[-1].name
    data = c_nvml.data_file("health", machine(), generation, t=AT_S)
    inject = tmp_path / "xid"
    inject.write_text("", encoding="utf-8")
    env = c_nvml.environment(generation=generation, binding=NEWEST, data=data)
    env["GPUTOP_CNVML_XID"] = str(inject)
    result = subprocess.run(
        [sys.executable, "-c", ECC_EVENTS],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    ecc, xid = seen["ecc"], seen["xid"]
    assert seen["supported"] == [xid | ecc, xid | ecc, xid, xid | ecc]
    assert seen["refused"] == [ecc, ecc | xid]
    assert (seen["before"], seen["after"]) == (2, 3)
    assert seen["geforce"] == [[43, 1]]
    assert seen["took"] < HEALTH_PERIOD_S / 2  # not at the next reading
