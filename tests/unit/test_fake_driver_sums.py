"""The simulated driver's arithmetic (issue 40): a card's processes never add up to more than
the card. A real driver measures both on one timeline, so the SM % of a card's processes
(each the share of the time its kernels ran) add up to at most the card's utilisation, and
their memory is part of the card's used memory. dgx-h100's processes added up to 160 % on
cards at 93 %, and ``report --by gpu`` said MEAN SM 100 % on every card (docs/scenario.md,
"What adds up")."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pynvml
import pytest
from helpers.fake_nvml import FULL_GPU, MIB, make_nvml
from helpers.waiting import wait_for

from gputop.core.fake import BUILTIN_SCENARIOS
from gputop.core.fake.card_load import share_out
from gputop.core.model import GpuSample, Snapshot
from gputop.core.sampling.source import open_backend

MINUTES = 5
SAMPLE_EVERY_S = 3.35
"""Not a whole second: most samples fall between two of the driver's one-second process
samples, where the card's reading and its processes' must still come from the same one."""
OWN_UUID = f"GPU-{uuid.uuid4()}"
"""This file's own card: a job another test pins to a card is never listed on it."""


def _snapshots(scenario: str) -> Iterator[Snapshot]:
    """What gputop samples of ``scenario`` every few seconds over several minutes."""
    backend = open_backend(scenario, environ={"GPUTOP_FAKE_TIME": "0"})
    try:
        t = 0.0
        while t <= MINUTES * 60:
            backend.nvml.set_time(t)
            yield backend.sample()
            t += SAMPLE_EVERY_S
    finally:
        backend.close()


def _broken_sums(gpu: GpuSample) -> list[str]:
    """Every sum of ``gpu``'s processes that is more than the card's own reading."""
    broken = []

    def check(what: str, parts: list[int | None], whole: int | None) -> None:
        known = [part for part in parts if part is not None]
        if whole is not None and known and sum(known) > whole:
            broken.append(f"GPU {gpu.physical_index}: {what} {sum(known)} > {whole}")

    processes = gpu.processes
    check("SM %", [p.sm_util_percent for p in processes], gpu.utilization_gpu_percent)
    check("memory %", [p.memory_util_percent for p in processes], gpu.utilization_memory_percent)
    check("memory", [p.used_memory_bytes for p in processes], gpu.memory_used_bytes)
    for owner, activity in [(f"GPU {gpu.physical_index}", gpu.activity)] + [
        (f"MIG {m.mig_index}", m.activity) for m in gpu.mig_devices
    ]:  # GPM: a tensor pipe works only on an active SM, an SM only while the engine does
        sm_active = activity.sm_active_percent
        tensor = activity.tensor_active_percent
        graphics = activity.graphics_percent
        if sm_active is not None and tensor is not None and tensor > sm_active + 1e-9:
            broken.append(f"{owner}: tensor active {tensor:.1f} > SM active {sm_active:.1f}")
        if sm_active is not None and graphics is not None and sm_active > graphics + 1e-9:
            broken.append(f"{owner}: SM active {sm_active:.1f} > graphics {graphics:.1f}")
    for mig in gpu.mig_devices:
        on_it = [p for p in processes if p.mig_uuid is not None and p.mig_uuid == mig.uuid]
        check(
            f"MIG {mig.mig_index} memory",
            [p.used_memory_bytes for p in on_it],
            mig.memory_used_bytes,
        )
        check(f"MIG {mig.mig_index} SM %", [p.sm_util_percent for p in on_it], 100)
    return broken


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_no_cards_processes_add_up_to_more_than_the_card(scenario: str) -> None:
    broken: list[str] = []
    measured = 0
    for snapshot in _snapshots(scenario):
        for gpu in snapshot.gpus:
            broken += [f"t={snapshot.timestamp:.2f} {line}" for line in _broken_sums(gpu)]
            measured += sum(p.sm_util_percent is not None for p in gpu.processes)
    assert not broken, "\n".join(broken[:20])
    if scenario in ("demo", "dgx-h100", "mixed"):
        assert measured > 0  # the check saw per-process SM % at all


def test_a_busy_cards_processes_share_its_time_in_proportion() -> None:
    """Two processes that each would keep the card 80 % busy, on a card 60 % busy: each gets
    30 %, as time-slicing gives them; one alone keeps what it asks for."""
    crowded = {
        **FULL_GPU,
        "utilization_gpu": 60,
        "utilization_memory": 20,
        "memory_used_mib": 1000,
        "processes": [
            {"pid": 4300001, "used_memory_mib": 700, "sm_util": 80, "mem_util": 30},
            {"pid": 4300002, "used_memory_mib": 700, "sm_util": 80, "mem_util": 10},
        ],
    }
    nvml = make_nvml(crowded)
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    samples = nvml.nvmlDeviceGetProcessUtilization(handle, 0)
    assert sorted((s.pid, s.smUtil, s.memUtil) for s in samples) == [
        (4300001, 30, 15),
        (4300002, 30, 5),
    ]
    assert nvml.nvmlDeviceGetUtilizationRates(handle).gpu == 60
    used = nvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2).used
    assert used == 1400 * MIB  # at least what its processes hold
    alone = make_nvml({**crowded, "processes": crowded["processes"][:1], "utilization_gpu": 90})
    (sample,) = alone.nvmlDeviceGetProcessUtilization(alone.nvmlDeviceGetHandleByIndex(0), 0)
    assert (sample.smUtil, sample.memUtil) == (80, 20)  # memory %: the card's 20 at most


@pytest.fixture(name="pinned_job")
def pinned_job_fixture() -> Iterator[subprocess.Popen[bytes]]:
    """A process pinned to the simulated card OWN_UUID, as a launched job is."""
    job = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": OWN_UUID},
    )
    yield job
    job.kill()
    job.wait()


def test_a_job_launched_on_a_card_adds_to_the_cards_readings(
    pinned_job: subprocess.Popen[bytes],
) -> None:
    """A job makes its card busier and fuller, so its own SM % and memory fit in the card's:
    on an idle card it has what the job profile says."""
    idle = {
        **FULL_GPU,
        "uuid": OWN_UUID,
        "utilization_gpu": 0,
        "utilization_memory": 0,
        "memory_used_mib": 300,
    }
    idle["processes"] = [{"pid": 4300001, "used_memory_mib": 300, "sm_util": 0}]
    profile = {"used_memory_mib": 2048, "sm_util": 35, "mem_util": 12}
    nvml = make_nvml(idle, job_profile=profile)
    handle = nvml.nvmlDeviceGetHandleByIndex(0)

    def listed() -> set[int]:
        return {p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}

    wait_for(lambda: pinned_job.pid in listed(), "the job on its card")
    rates = nvml.nvmlDeviceGetUtilizationRates(handle)
    assert (rates.gpu, rates.memory) == (35, 12)
    used = nvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2).used
    assert used == (300 + 2048) * MIB
    (sample,) = nvml.nvmlDeviceGetProcessUtilization(handle, 0)
    assert (sample.pid, sample.smUtil, sample.memUtil) == (pinned_job.pid, 35, 12)


def test_shares_are_whole_percent_that_add_up_to_the_card_and_keep_small_ones() -> None:
    """A trainer asking 91 %, two workers asking 1 % each and a server asking 15 %, on a
    card 93 % busy: whole percent adding up to 93, none above what it asked, and the workers'
    1 % not rounded away to an idle 0."""
    parts = share_out({"trainer": 91, "worker-a": 1, "worker-b": 1, "server": 15}, 93)
    assert parts == {"trainer": 78, "worker-a": 1, "worker-b": 1, "server": 13}
    assert share_out({"a": 30, "b": 20}, 60) == {"a": 30, "b": 20}  # they fit: as asked
    assert share_out({"a": 30, "b": 0}, 10) == {"a": 10, "b": 0}
    assert share_out({"a": 5}, None) == {"a": 5}  # no card reading: nothing to fit in
