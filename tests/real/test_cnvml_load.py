"""The C NVML's cards and processes add up as a driver's do, through the real nvidia-ml-py.

A driver measures a card and its processes on one timeline: the SM % of a card's processes
(each the share of the sample period its kernels ran) add up to at most the card's
utilisation, their memory-controller % to at most the card's, and the memory they hold is
part of the card's used memory (a GPU in MIG mode holds its MIG devices'). The C NVML
served each process's scenario signal as it was, so dgx-h100's processes added up to 160 %
on cards at 93 %, as the Python fake's did before it shared each card out
(gputop/core/fake/card_load.py, docs/scenario.md "What adds up"). Every shipped scenario,
at several scenario times, each a run of its own on the R550 library (which has every
process call) under the newest binding (docs/c-nvml.md).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cnvml.fixtures import NEWEST, CNvml
from helpers import TESTS

from gputop.core.fake import BUILTIN_SCENARIOS, load_scenario, resolve_scenario_path

MIB = 1024 * 1024
PROBE = TESTS / "cnvml" / "load_probe.py"
GENERATION = "R550"
TIMES = (0.0, 75.0, 150.0, 270.0)
_reports: dict[tuple[str, float], dict[str, Any]] = {}


def _load(c_nvml: CNvml, scenario: str, t: float) -> dict[str, Any]:
    """What the binding reads of ``scenario``'s cards at scenario time ``t`` (one run)."""
    key = (scenario, t)
    if key not in _reports:
        document = json.loads(resolve_scenario_path(scenario).read_text(encoding="utf-8"))
        data = c_nvml.data_file(f"{scenario}-at-{t:g}", document, GENERATION, t=t)
        result = c_nvml.run([str(PROBE)], generation=GENERATION, binding=NEWEST, data=data)
        assert result.returncode == 0, result.stderr
        _reports[key] = json.loads(result.stdout)
    return _reports[key]


def _broken_sums(index: int, gpu: dict[str, Any]) -> list[str]:
    """Every sum of GPU ``index``'s processes that is more than the card's own reading."""
    broken = []

    def check(what: str, parts: list[int | None], whole: int | None) -> None:
        known = [part for part in parts if part is not None]
        if whole is not None and known and sum(known) > whole:
            broken.append(f"GPU {index}: {what} {sum(known)} > {whole}")

    busy, busy_memory = gpu["utilization"] or (None, None)
    for call in ("samples", "samples_info"):
        samples = gpu[call] or []
        check(f"{call} SM %", [sm for _pid, sm, _mem in samples], busy)
        check(f"{call} memory %", [mem for _pid, _sm, mem in samples], busy_memory)
    memory = gpu["memory"]
    used = memory["used_v2"] if memory["used_v2"] is not None else memory["used_v1"]
    check("memory", list(gpu["processes"].values()), used)
    check("MIG devices' memory", [mig["used_v2"] for mig in gpu["migs"]], used)
    for mig in gpu["migs"]:
        check(f"{mig['uuid']} memory", [mig["used_v2"]], mig["total"])
    return broken


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_no_cards_processes_add_up_to_more_than_the_card(c_nvml: CNvml, scenario: str) -> None:
    broken: list[str] = []
    measured = 0
    for t in TIMES:
        for index, gpu in enumerate(_load(c_nvml, scenario, t)["gpus"]):
            if gpu is None:  # a handle the scenario refuses
                continue
            broken += [f"t={t:g} {line}" for line in _broken_sums(index, gpu)]
            measured += len(gpu["samples_info"] or [])
    assert not broken, "\n".join(broken[:20])
    if scenario in ("demo", "dgx-h100", "mixed"):
        assert measured > 0  # the check saw per-process samples at all


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_every_run_names_the_same_cards_and_processes(c_nvml: CNvml, scenario: str) -> None:
    """Each time is a run of its own (a data file written, a process started): each names a
    card by the scenario's UUID and its processes by the scenario's pids, the same in every
    run, so what one run recorded of a process is found again in the next."""
    loaded = load_scenario(resolve_scenario_path(scenario))
    uuids = [gpu.uuid for gpu in loaded.gpus]
    pids = {p.pid for gpu in loaded.gpus for p in gpu.processes}
    first = [_identities(gpu) for gpu in _load(c_nvml, scenario, TIMES[0])["gpus"]]
    assert any(first), "no card answered"
    for t in TIMES:
        now = [_identities(gpu) for gpu in _load(c_nvml, scenario, t)["gpus"]]
        for index, (then, identities) in enumerate(zip(first, now, strict=True)):
            if identities is None:  # a refused handle, a card lost by then
                continue
            assert identities[0] == uuids[index], f"t={t:g} GPU {index}"
            assert set(identities[1]) <= pids, f"t={t:g} GPU {index}"
            if then is not None:
                assert identities == then, f"t={t:g} GPU {index}"


def _identities(gpu: dict[str, Any] | None) -> tuple[str, list[int], list[str]] | None:
    """A card's UUID, its processes' pids and its MIG devices' UUIDs; ``None`` for a card
    that does not answer."""
    if gpu is None or gpu["uuid"] is None:
        return None
    pids = sorted(int(pid) for pid in gpu["processes"])
    return gpu["uuid"], pids, sorted(mig["uuid"] for mig in gpu["migs"])


CROWDED = {
    "description": "cards whose processes ask for more than the cards say",
    "gpus": [
        {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-4c4c4c4c-1111-4111-8111-111111111111",
         "memory_total_mib": 81920, "memory_used_mib": 1000, "utilization_gpu": 60,
         "utilization_memory": 20,
         "processes": [
             {"pid": 4300001, "used_memory_mib": 700, "sm_util": 80, "mem_util": 30},
             {"pid": 4300002, "used_memory_mib": 700, "sm_util": 80, "mem_util": 10},
         ]},
        {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-4c4c4c4c-2222-4222-8222-222222222222",
         "memory_total_mib": 1000, "memory_used_mib": 500, "utilization_gpu": 10,
         "processes": [
             {"pid": 4300003, "used_memory_mib": 900, "sm_util": 5},
             {"pid": 4300004, "used_memory_mib": 300, "sm_util": 5},
         ]},
        {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-4c4c4c4c-3333-4333-8333-333333333333",
         "memory_total_mib": 81920, "memory_used_mib": 100, "mig_mode": [1, 1],
         "mig_devices": [
             {"uuid": "MIG-4c4c4c4c-5b6a-4789-8a9b-0c1d2e3f4a5b", "gpu_instance_id": 1,
              "compute_instance_id": 0, "memory_total_mib": 40000, "memory_used_mib": 3000},
             {"uuid": "MIG-5d5d5d5d-5b6a-4789-8a9b-0c1d2e3f4a5b", "gpu_instance_id": 2,
              "compute_instance_id": 0, "memory_total_mib": 40000, "memory_used_mib": 2000},
         ]},
    ],
}  # fmt: skip
"""A card 60 % busy whose two processes would each keep it 80 % busy and hold more than it
says; a card whose processes hold more than it has; a GPU in MIG mode whose MIG devices hold
more than it says."""


def test_a_crowded_card_is_shared_out_as_the_python_fake_shares_it(c_nvml: CNvml) -> None:
    """The C NVML serves the Python fake's shares (tests/unit/test_fake_driver_sums.py has
    the same first card): time in proportion, memory at least the processes', at most the
    card's, a GPU holding its MIG devices' memory."""
    data = c_nvml.data_file("crowded", CROWDED, GENERATION)
    result = c_nvml.run([str(PROBE)], generation=GENERATION, binding=NEWEST, data=data)
    assert result.returncode == 0, result.stderr
    busy, small, mig = json.loads(result.stdout)["gpus"]
    assert [_broken_sums(i, gpu) for i, gpu in enumerate((busy, small, mig))] == [[], [], []]
    assert sorted(busy["samples"]) == [[4300001, 30, 15], [4300002, 30, 5]]
    assert sorted(busy["samples_info"]) == [[4300001, 30, 15], [4300002, 30, 5]]
    assert busy["utilization"] == [60, 20]
    assert busy["memory"]["used_v2"] == 1400 * MIB
    assert small["processes"] == {"4300003": 750 * MIB, "4300004": 250 * MIB}
    assert small["memory"]["used_v2"] == 1000 * MIB
    assert mig["memory"]["used_v2"] == (3000 + 2000) * MIB
