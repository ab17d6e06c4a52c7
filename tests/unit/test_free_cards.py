"""The free-card policy: which cards `pick`, `run --auto` and `--wait` may take, and why not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from gputop.core.errors import GputopError, UsageError
from gputop.core.free_cards import (
    CardVerdict,
    FreePolicy,
    NotEnoughFreeGpus,
    judge_cards,
    launch_warnings,
    pick_free,
)
from gputop.core.model import GpuProcess, GpuSample, MigDevice, ProcessOrigin, ProcessType, Snapshot
from gputop.core.sampling.nvml_backend import NvmlBackend

GIB = 1024**3
MIB = 1024**2
ME = "me"
DEFAULT = FreePolicy()

OpenFake = Callable[..., NvmlBackend]


@pytest.fixture(autouse=True)
def private_state(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(tmp_path / "state"))


def card(index: int = 0, **overrides: Any) -> GpuSample:
    """An idle 80 GiB card: free by the default policy until an override says otherwise."""
    fields: dict[str, Any] = {
        "physical_index": index,
        "uuid": f"GPU-{index:08d}-aaaa-bbbb-cccc-000000000000",
        "name": "NVIDIA H100 80GB HBM3",
        "pci_bus_id": f"00000000:{index + 1:02X}:00.0",
        "memory_total_bytes": 80 * GIB,
        "memory_used_bytes": 1 * GIB,
        "memory_free_bytes": 79 * GIB,
        "utilization_gpu_percent": 0,
    }
    fields.update(overrides)
    return GpuSample(**fields)


def memory(used_gib: float, total_gib: float = 80) -> dict[str, int]:
    used, total = int(used_gib * GIB), int(total_gib * GIB)
    return {
        "memory_used_bytes": used,
        "memory_total_bytes": total,
        "memory_free_bytes": total - used,
    }


def process(
    user: str | None, pid: int = 100, index: int = 0, kind: ProcessType = ProcessType.COMPUTE
) -> GpuProcess:
    origin = ProcessOrigin.SIMULATED if user is not None else ProcessOrigin.FOREIGN
    return GpuProcess(
        pid=pid, physical_index=index, type=kind, used_memory_bytes=GIB, user=user, origin=origin
    )


def machine(*gpus: GpuSample) -> Snapshot:
    return Snapshot(
        host="test",
        driver_version="550.127.05",
        cuda_driver_version=12040,
        nvml_version="12.550.127.05",
        timestamp=0.0,
        gpus=gpus,
    )


def verdict(gpu: GpuSample, user: str = ME, **kwargs: Any) -> CardVerdict:
    (only,) = judge_cards(machine(gpu), kwargs.pop("policy", DEFAULT), user, **kwargs)
    return only


@dataclass(frozen=True)
class FakeJob:
    id: int
    name: str
    physical_indices: tuple[int, ...]
    status: str = "running"


# --- the rules -----------------------------------------------------------------------------


def test_an_idle_card_is_free() -> None:
    result = verdict(card())
    assert result.free
    assert result.reasons == ()
    assert result.free_memory_bytes == 79 * GIB
    assert result.utilization_percent == 0


def test_a_lost_card_is_not_free_and_lost_is_the_only_reason() -> None:
    result = verdict(card(lost=True, memory_free_bytes=None, utilization_gpu_percent=None))
    assert not result.free
    assert result.reasons == ("lost",)


def test_a_card_in_mig_mode_is_not_free() -> None:
    result = verdict(card(mig_mode_current=True))
    assert not result.free
    assert result.reasons == ("in MIG mode (pin one of its MIG instances instead)",)


def test_another_users_process_makes_a_card_busy() -> None:
    result = verdict(card(processes=(process("bob"),)))
    assert not result.free
    assert result.reasons == ("1 process of bob",)


def test_other_users_are_listed_with_the_biggest_first() -> None:
    users = ["alice", "bob", "carol", "bob", "carol", "bob"]
    gpu = card(processes=tuple(process(u, pid=i) for i, u in enumerate(users)))
    assert verdict(gpu).reasons == ("3 processes of bob, 2 of carol, 1 of alice",)


def test_the_users_own_processes_do_not_make_a_card_busy() -> None:
    assert verdict(card(processes=(process(ME), process(ME, pid=101)))).free


def test_the_memory_of_the_users_own_processes_still_counts() -> None:
    result = verdict(card(processes=(process(ME),), **memory(used_gib=79.5)))
    assert not result.free
    assert result.reasons == ("only 0.5 GiB free (needs 1.0 GiB)",)


def test_a_process_of_unknown_owner_makes_a_card_busy() -> None:
    result = verdict(card(processes=(process(None), process(None, pid=101))))
    assert not result.free
    assert result.reasons == ("2 processes of unknown owner",)


def test_a_card_whose_processes_nvml_will_not_list_is_not_free() -> None:
    result = verdict(card(processes_listed=False))
    assert not result.free
    assert result.reasons == ("processes not listed by NVML (owners unknown)",)


def test_a_card_claimed_by_an_active_gputop_job_is_not_free() -> None:
    gpus = machine(card(0), card(1))
    verdicts = judge_cards(gpus, DEFAULT, ME, {4: [1], 7: [0, 1]})
    assert verdicts[0].reasons == ("in use by gputop job 7",)
    assert verdicts[1].reasons == ("in use by gputop job 4", "in use by gputop job 7")


def test_too_little_free_memory_makes_a_card_busy() -> None:
    result = verdict(card(**memory(used_gib=79.6)))
    assert not result.free
    assert result.reasons == ("only 0.4 GiB free (needs 1.0 GiB)",)


def test_exactly_the_minimum_free_memory_is_enough() -> None:
    gpu = card(memory_free_bytes=2048 * MIB)
    assert verdict(gpu, policy=FreePolicy(min_free_mib=2048)).free
    assert not verdict(gpu, policy=FreePolicy(min_free_mib=2049)).free


def test_utilisation_above_the_maximum_makes_a_card_busy() -> None:
    result = verdict(card(utilization_gpu_percent=11))
    assert not result.free
    assert result.reasons == ("utilisation 11 % (max 10 %)",)


def test_utilisation_at_the_maximum_is_allowed() -> None:
    assert verdict(card(utilization_gpu_percent=10)).free


def test_unknown_memory_use_is_not_free() -> None:
    gpu = card(memory_free_bytes=None, memory_used_bytes=None)
    result = verdict(gpu)
    assert not result.free
    assert result.reasons == ("memory use unknown",)


def test_unknown_utilisation_is_not_free() -> None:
    result = verdict(card(utilization_gpu_percent=None))
    assert not result.free
    assert result.reasons == ("utilisation unknown",)


def test_free_memory_is_total_minus_used_when_nvml_gives_no_free_reading() -> None:
    result = verdict(card(memory_free_bytes=None))
    assert result.free
    assert result.free_memory_bytes == 79 * GIB


def test_a_prohibited_compute_mode_is_not_free() -> None:
    result = verdict(card(compute_mode=2))
    assert result.reasons == ("compute mode is Prohibited (no CUDA program may use it)",)


def test_exclusive_process_mode_with_the_users_own_process_is_not_free() -> None:
    result = verdict(card(compute_mode=3, processes=(process(ME, pid=4242),)))
    assert result.reasons == ("exclusive-process mode, already held by pid 4242",)


def test_exclusive_process_mode_without_processes_is_free() -> None:
    assert verdict(card(compute_mode=3)).free


def test_every_reason_is_given_not_just_the_first() -> None:
    gpu = card(processes=(process("bob"),), utilization_gpu_percent=90, **memory(used_gib=79.9))
    assert verdict(gpu).reasons == (
        "1 process of bob",
        "only 0.1 GiB free (needs 1.0 GiB)",
        "utilisation 90 % (max 10 %)",
    )


def test_verdicts_come_in_physical_order() -> None:
    verdicts = judge_cards(machine(card(2), card(0), card(1)), DEFAULT, ME)
    assert [v.physical_index for v in verdicts] == [0, 1, 2]


def test_a_negative_minimum_memory_is_refused() -> None:
    with pytest.raises(UsageError, match="0 MiB or more"):
        FreePolicy(min_free_mib=-1)


def test_a_maximum_utilisation_above_100_is_refused() -> None:
    with pytest.raises(UsageError, match="between 0 and 100"):
        FreePolicy(max_util_percent=101)


# --- ranking -------------------------------------------------------------------------------


def test_pick_prefers_the_card_with_most_free_memory() -> None:
    gpus = machine(card(0, **memory(40)), card(1, **memory(10)), card(2, **memory(20)))
    assert pick_free(gpus, 1, DEFAULT, ME) == [1]


def test_pick_breaks_a_memory_tie_by_lowest_utilisation() -> None:
    gpus = machine(card(0, utilization_gpu_percent=7), card(1, utilization_gpu_percent=3))
    assert pick_free(gpus, 1, DEFAULT, ME) == [1]


def test_pick_breaks_a_full_tie_by_lowest_physical_index() -> None:
    assert pick_free(machine(card(0), card(1), card(2)), 2, DEFAULT, ME) == [0, 1]


def test_pick_returns_the_chosen_cards_in_physical_order() -> None:
    gpus = machine(card(0, **memory(30)), card(1, **memory(50)), card(2, **memory(10)))
    assert pick_free(gpus, 2, DEFAULT, ME) == [0, 2]


def test_pick_leaves_cards_of_active_jobs_alone() -> None:
    gpus = machine(card(0), card(1, **memory(0)))
    assert pick_free(gpus, 1, DEFAULT, ME, {3: (1,)}) == [0]


def test_picking_zero_cards_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="at least 1"):
        pick_free(machine(card()), 0, DEFAULT, ME)


# --- not enough ----------------------------------------------------------------------------


def not_enough(snapshot: Snapshot, count: int, policy: FreePolicy = DEFAULT) -> str:
    with pytest.raises(NotEnoughFreeGpus) as caught:
        pick_free(snapshot, count, policy, ME)
    return str(caught.value)


def test_not_enough_says_how_many_are_free_and_why_each_other_card_is_not() -> None:
    gpus = machine(card(0, lost=True), card(1), card(2, processes=(process("bob"),)))
    assert not_enough(gpus, 2).splitlines() == [
        "Asked for 2 free GPUs, but only 1 is free (GPU 1). Free means at least 1.0 GiB of "
        "free memory, at most 10 % utilisation, no other user's processes and no running "
        "gputop job.",
        "  GPU 0: lost",
        "  GPU 2: 1 process of bob",
    ]


def test_not_enough_when_none_is_free() -> None:
    message = not_enough(machine(card(0, utilization_gpu_percent=50)), 1)
    assert message.startswith("Asked for 1 free GPU, but none is free.")


def test_not_enough_when_the_machine_has_fewer_cards_than_asked() -> None:
    message = not_enough(machine(card(0), card(1)), 3)
    assert message.startswith(
        "Asked for 3 free GPUs, but this machine has only 2 GPUs, 2 of them free (GPUs 0, 1)."
    )


def test_not_enough_on_a_machine_without_gpus() -> None:
    assert not_enough(machine(), 1) == "Asked for 1 free GPU, but this machine has no GPU."


def test_not_enough_states_the_thresholds_that_were_used() -> None:
    message = not_enough(machine(card(0, **memory(79))), 1, FreePolicy(2048, 25))
    assert "at least 2.0 GiB of free memory, at most 25 % utilisation" in message
    assert "GPU 0: only 1.0 GiB free (needs 2.0 GiB)" in message


def test_not_enough_is_a_gputop_error_with_exit_code_1() -> None:
    error = NotEnoughFreeGpus(1, [], DEFAULT)
    assert isinstance(error, GputopError)
    assert error.exit_code == 1


# --- built-in scenarios (t = 30 s) -----------------------------------------------------------


def sampled(fake_backend: OpenFake, name: str) -> Snapshot:
    return fake_backend(name).sample()


def test_v100x4_has_two_idle_cards(fake_backend: OpenFake) -> None:
    assert pick_free(sampled(fake_backend, "v100x4"), 2, DEFAULT, ME) == [2, 3]


def test_v100x4_picks_the_emptiest_card_first(fake_backend: OpenFake) -> None:
    assert pick_free(sampled(fake_backend, "v100x4"), 1, DEFAULT, ME) == [2]


def test_v100x4_busy_cards_are_busy_by_utilisation(fake_backend: OpenFake) -> None:
    verdicts = judge_cards(sampled(fake_backend, "v100x4"), DEFAULT, "ubuntu")
    # GPU 0's processes are ubuntu's (unless a host process has their pid: then its owner).
    assert "utilisation 89 % (max 10 %)" in verdicts[0].reasons
    assert not any("ubuntu" in reason for reason in verdicts[0].reasons)
    assert verdicts[1].reasons == ("utilisation 41 % (max 10 %)",)


def test_a_higher_utilisation_limit_frees_v100x4_card_1(fake_backend: OpenFake) -> None:
    policy = FreePolicy(max_util_percent=50)
    assert pick_free(sampled(fake_backend, "v100x4"), 3, policy, ME) == [1, 2, 3]


def test_mixed_has_only_the_h100_free(fake_backend: OpenFake) -> None:
    snapshot = sampled(fake_backend, "mixed")
    assert pick_free(snapshot, 1, DEFAULT, ME) == [3]
    assert "only 1 is free (GPU 3)" in not_enough(snapshot, 2)


def test_faulty_has_no_free_card_and_says_why(fake_backend: OpenFake) -> None:
    verdicts = judge_cards(sampled(fake_backend, "faulty"), DEFAULT, ME)
    assert not any(v.free for v in verdicts)
    assert "processes not listed by NVML (owners unknown)" in verdicts[0].reasons
    assert "2 processes of unknown owner" in verdicts[1].reasons
    assert verdicts[2].reasons == ("lost",)


def test_dgx_h100_is_fully_booked(fake_backend: OpenFake) -> None:
    message = not_enough(sampled(fake_backend, "dgx-h100"), 1)
    assert "none is free" in message
    assert "GPU 7: 12 processes of bob, 8 of carol, 3 of dave, 1 of alice, 1 of frank" in message


def test_a_mig_scenario_card_is_refused_for_its_mode(fake_backend: OpenFake) -> None:
    verdicts = judge_cards(sampled(fake_backend, "mig"), DEFAULT, ME)
    assert verdicts[0].reasons[0] == "in MIG mode (pin one of its MIG instances instead)"


# --- launch warnings -------------------------------------------------------------------------


def warnings_for(
    gpus: Snapshot, indices: list[int], jobs: tuple[FakeJob, ...] = (), user: str = ME
) -> list[str]:
    return launch_warnings(gpus, indices, user, jobs)


def test_no_warnings_for_idle_cards() -> None:
    assert warnings_for(machine(card(0), card(1)), [1, 0]) == []


def test_a_lost_card_is_reported_lost() -> None:
    assert warnings_for(machine(card(3, lost=True)), [3]) == ["GPU 3 is lost"]


def test_a_mig_card_without_instances_is_reported() -> None:
    gpus = machine(card(1, mig_mode_current=True, utilization_gpu_percent=None))
    assert warnings_for(gpus, [1]) == ["GPU 1 is in MIG mode with no instances"]


def test_a_mig_card_with_instances_says_what_the_job_sees() -> None:
    instances = tuple(MigDevice(i, f"MIG-{i}", i, 0, 10 * GIB, 0, 14, "3g.40gb") for i in range(2))
    gpus = machine(card(0, mig_mode_current=True, mig_devices=instances))
    assert warnings_for(gpus, [0]) == [
        "GPU 0 is in MIG mode: the job sees its 2 MIG instances, not the whole GPU"
    ]


def test_a_card_of_a_running_job_is_reported_with_the_job() -> None:
    job = FakeJob(4, "train.py", (2, 0))
    assert warnings_for(machine(card(0)), [0], (job,)) == [
        "GPU 0 is in use by job 4 (train.py), still running"
    ]


def test_a_card_a_waiting_job_wants_is_reported_as_wanted() -> None:
    job = FakeJob(5, "eval.py", (0,), status="waiting")
    assert warnings_for(machine(card(0)), [0], (job,)) == [
        "GPU 0 is wanted by job 5 (eval.py), still waiting for its cards"
    ]


def test_a_job_on_other_cards_gives_no_warning() -> None:
    assert warnings_for(machine(card(0), card(1)), [0], (FakeJob(4, "a", (1,)),)) == []


def test_a_card_with_another_users_processes_is_busy() -> None:
    bob = tuple(process("bob", pid=p) for p in range(3))
    gpus = machine(card(2, processes=bob, **memory(71.7, 80)))
    assert warnings_for(gpus, [2]) == [
        "GPU 2 is busy: 71.7 GiB of 80.0 GiB used, 3 processes of bob"
    ]


def test_a_busy_card_mentions_its_utilisation() -> None:
    gpus = machine(card(0, utilization_gpu_percent=89, **memory(7.9, 15.8)))
    assert warnings_for(gpus, [0]) == ["GPU 0 is busy: 7.9 GiB of 15.8 GiB used, utilisation 89 %"]


def test_a_card_full_of_the_users_own_work_is_busy_and_says_it_is_theirs() -> None:
    gpus = machine(card(0, processes=(process(ME),), **memory(79.5)))
    assert warnings_for(gpus, [0]) == [
        "GPU 0 is busy: 79.5 GiB of 80.0 GiB used, 1 of your processes"
    ]


def test_the_users_own_light_process_gives_no_warning() -> None:
    assert warnings_for(machine(card(0, processes=(process(ME),))), [0]) == []


def test_a_card_of_unknown_owner_is_busy() -> None:
    gpus = machine(card(0, processes=(process(None),), **memory(8, 16)))
    assert warnings_for(gpus, [0]) == [
        "GPU 0 is busy: 8.0 GiB of 16.0 GiB used, 1 process of unknown owner"
    ]


def test_a_card_not_on_the_machine_is_reported() -> None:
    assert warnings_for(machine(card(0)), [9]) == ["GPU 9 is not on this machine"]


def test_warnings_follow_the_order_the_cards_were_chosen_in() -> None:
    gpus = machine(card(0, lost=True), card(1), card(2, lost=True))
    assert warnings_for(gpus, [2, 1, 0]) == ["GPU 2 is lost", "GPU 0 is lost"]


def test_busy_is_judged_by_the_policy_given() -> None:
    gpus = machine(card(0, utilization_gpu_percent=30))
    relaxed = FreePolicy(max_util_percent=50)
    assert launch_warnings(gpus, [0], ME, [], policy=relaxed) == []
