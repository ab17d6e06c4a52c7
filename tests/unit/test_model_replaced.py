"""``records.replaced`` makes what ``dataclasses.replace`` makes, for any fields changed."""

from __future__ import annotations

import dataclasses
import random

import pytest
from helpers.jobs import snapshot_of

from gputop.core.model import GpuProcess, GpuSample, ProcessCuda, Snapshot
from gputop.core.records import replaced

CUDA = (
    ProcessCuda("0,1", None, 3, 3, 8, "10.0.0.1", 29500, "run", (0, 1), False),
    ProcessCuda(None, "PCI_BUS_ID", None, None, None, None, None, None, (), True, True, "x"),
)


def _objects(snapshot: Snapshot) -> list[object]:
    """The snapshot's GPUs and processes (some with a CUDA view), the views, and the
    Snapshot itself (not a record: a dataclass of its own)."""
    found: list[object] = [snapshot, *CUDA]
    for gpu in snapshot.gpus:
        found.append(gpu)
        for position, process in enumerate(gpu.processes):
            cuda = CUDA[position % 2] if position % 3 == 0 else process.cuda
            found.append(dataclasses.replace(process, cuda=cuda))
    return found


def test_the_same_object_as_dataclasses_replace_for_random_changes() -> None:
    rng = random.Random(44)
    objects = (
        _objects(snapshot_of("dgx-h100"))
        + _objects(snapshot_of("mixed"))
        + _objects(snapshot_of("mig"))
    )
    kinds = {type(obj) for obj in objects}
    assert {GpuSample, GpuProcess, ProcessCuda, Snapshot} <= kinds
    for _ in range(3_000):
        obj = rng.choice(objects)
        donor = rng.choice([o for o in objects[:400] if type(o) is type(obj)] or [obj])
        names = [spec.name for spec in dataclasses.fields(obj)]  # type: ignore[arg-type]
        changed = rng.sample(names, rng.randrange(0, len(names) + 1))
        changes = {name: getattr(donor, name) for name in changed}
        want = dataclasses.replace(obj, **changes)  # type: ignore[type-var]
        got = replaced(obj, **changes)
        assert type(got) is type(want) and got == want
        assert all(getattr(got, n) is getattr(want, n) for n in names)  # the same objects
        assert got is not obj
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(got, rng.choice(names), None)  # as frozen as the dataclass's


@pytest.mark.parametrize("cls", [GpuSample, GpuProcess, ProcessCuda])
def test_a_field_the_class_does_not_have_is_refused(cls: type) -> None:
    obj = next(o for o in _objects(snapshot_of("dgx-h100")) if type(o) is cls)
    with pytest.raises(TypeError):
        dataclasses.replace(obj, no_such_field=1)
    with pytest.raises(TypeError):
        replaced(obj, no_such_field=1)
