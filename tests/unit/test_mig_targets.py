"""The free-card policy for one MIG instance, and what a job holds."""

from __future__ import annotations

from gputop.core.mig_targets import (
    MigTarget,
    judge_mig_instance,
    mig_target_by_uuid,
    resolve_gpus,
    target_keys,
)
from gputop.core.model import Snapshot
from gputop.core.sampling.source import open_backend

MIB = 1 << 20
MIG_1 = "MIG-4fd95d93-9b6c-cbc0-9143-9fb3322c58bd"


def mig_snapshot() -> Snapshot:
    backend = open_backend("mig", environ={"GPUTOP_FAKE_TIME": "30"})
    try:
        return backend.sample()
    finally:
        backend.close()


def instance(part: str) -> MigTarget:
    """The MIG instance ``part`` names, as ``gputop run --gpus`` reads it."""
    snapshot = mig_snapshot()
    [uuid] = resolve_gpus(snapshot, [part])
    found = mig_target_by_uuid(snapshot.gpus, str(uuid))
    assert found is not None
    return found


def test_an_idle_instance_with_room_is_free() -> None:
    target = instance("0:1")
    assert judge_mig_instance(target, 1024 * MIB, "me").free


def test_another_users_process_on_the_instance_makes_it_busy() -> None:
    target = instance("0:2")
    verdict = judge_mig_instance(target, 1024 * MIB, "me")
    assert not verdict.free and verdict.reasons == ("1 process(es) of ben",)


def test_the_users_own_process_alone_does_not_make_it_busy() -> None:
    target = instance("0:2")
    assert judge_mig_instance(target, 1024 * MIB, "ben").free


def test_too_little_free_memory_on_the_instance_makes_it_busy() -> None:
    target = instance("0:1")  # 19968 MiB, 13 used
    verdict = judge_mig_instance(target, 30000 * MIB, "me")
    assert verdict.reasons == ("only 19.5 GiB free (needs 29.3 GiB)",)


def test_a_running_job_pinned_to_it_makes_it_taken() -> None:
    target = instance("0:1")
    assert judge_mig_instance(target, 0, "me", [7]).reasons == ("in use by gputop job 7",)


def test_jobs_on_two_instances_of_one_gpu_hold_different_things() -> None:
    first = target_keys([0], [MIG_1])
    second = target_keys([0], ["MIG-a13e59d2-2a9b-e1ae-eda6-91dfbd49f7ce"])
    whole = target_keys([0], ["GPU-ba8f65e1-d074-5bd5-b36d-f5b8ebdd53e9"])
    assert not first & second
    assert whole == {0}
