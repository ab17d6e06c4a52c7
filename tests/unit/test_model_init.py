"""A record's ``__init__`` (gputop/core/records.py) builds what the dataclass's would, for
the model's largest classes."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from gputop.core.model import (
    Clocks,
    GpuProcess,
    GpuSample,
    ProcessCuda,
    ProcessOrigin,
    ProcessType,
)

QUICK = (GpuProcess, GpuSample, ProcessCuda)


@pytest.mark.parametrize("cls", QUICK)
def test_signature_is_the_fields_in_order_with_their_defaults(cls: type) -> None:
    params = list(inspect.signature(cls).parameters.values())
    specs = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in specs]
    for param, spec in zip(params, specs, strict=True):
        assert param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        if spec.default is not dataclasses.MISSING:
            assert param.default is spec.default
        elif spec.default_factory is dataclasses.MISSING:
            assert param.default is inspect.Parameter.empty


def _process(**changes: object) -> GpuProcess:
    values: dict[str, object] = {
        "pid": 41,
        "physical_index": 2,
        "type": ProcessType.COMPUTE,
        "used_memory_bytes": 5 << 30,
    }
    return GpuProcess(**{**values, **changes})  # type: ignore[arg-type]


def test_a_process_has_its_values_and_the_defaults() -> None:
    process = _process(user="ana", command=("python", "train.py"))
    assert (process.pid, process.physical_index, process.used_memory_bytes) == (41, 2, 5 << 30)
    assert process.user == "ana" and process.command == ("python", "train.py")
    assert process.origin is ProcessOrigin.HOST and process.cuda is None
    assert process.sm_util_percent is None and process.start_ticks is None
    positional = GpuProcess(41, 2, ProcessType.COMPUTE, 5 << 30, None, None, None, None, None,
                            ProcessOrigin.HOST, "ana", ("python", "train.py"))  # fmt: skip
    assert positional == process and hash(positional) == hash(process)


def test_missing_and_unknown_arguments_are_refused_as_before() -> None:
    with pytest.raises(TypeError):
        GpuProcess(pid=1, physical_index=0, type=ProcessType.COMPUTE)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _process(colour="red")


def test_still_frozen_and_replace_asdict_pickle_work() -> None:
    process = _process()
    with pytest.raises(dataclasses.FrozenInstanceError):
        process.pid = 7  # type: ignore[misc]
    moved = dataclasses.replace(process, physical_index=5)
    assert moved.physical_index == 5 and moved.pid == 41 and process.physical_index == 2
    assert dataclasses.asdict(process)["used_memory_bytes"] == 5 << 30
    assert pickle.loads(pickle.dumps(process)) == process


def test_a_default_factory_makes_a_new_value_each_time() -> None:
    first = GpuSample(physical_index=0, uuid=None, name=None, pci_bus_id=None)
    second = GpuSample(physical_index=0, uuid=None, name=None, pci_bus_id=None)
    assert first.clocks == Clocks() and first.max_clocks == Clocks()
    assert first.clocks is not second.clocks
    given = Clocks(sm_mhz=1410)
    assert GpuSample(0, None, None, None, clocks=given).clocks is given
    assert first == second and first.processes == () and first.processes_listed is True
