"""The sampler builds each GpuProcess by place (nvml_backend._gpu_processes, 200 a refresh
on a busy server): every field must get what it would get by name."""

from __future__ import annotations

import dataclasses

from gputop.core.model import GpuProcess, ProcessOrigin, ProcessType
from gputop.core.sampling.host_processes import HostFacts
from gputop.core.sampling.nvml_backend import _gpu_processes
from gputop.core.sampling.nvml_processes import NvmlProcess, ProcessUtilization


def test_each_field_of_a_sampled_process_is_the_one_its_name_says() -> None:
    # Every input a different, recognisable value, so two fields swapped cannot agree.
    nvml = NvmlProcess(4242, ProcessType.COMPUTE, 11, "MIG-nv", 12, 13)
    util = ProcessUtilization(21, 22)
    facts = HostFacts(
        ProcessOrigin.FOREIGN,
        "h-user",
        ("h-command",),
        31.5,
        32,
        33.0,
        "h-hint",
        "env",  # type: ignore[arg-type]
        34,
    )
    views: list[tuple[object, int]] = []

    def view(environment: object, index: int) -> str:
        views.append((environment, index))
        return "cuda-view"

    (made,) = _gpu_processes(3, (nvml,), {4242: util}, {4242: facts}, view)  # type: ignore[arg-type]
    expected = GpuProcess(
        pid=4242,
        physical_index=3,
        type=ProcessType.COMPUTE,
        used_memory_bytes=11,
        sm_util_percent=21,
        memory_util_percent=22,
        mig_uuid=nvml.mig_uuid,
        gpu_instance_id=nvml.gpu_instance_id,
        compute_instance_id=nvml.compute_instance_id,
        origin=ProcessOrigin.FOREIGN,
        user=facts.user,
        command=facts.command,
        cpu_percent=31.5,
        host_memory_bytes=32,
        start_time=33.0,
        hint=facts.hint,
        cuda="cuda-view",  # type: ignore[arg-type]
        start_ticks=34,
    )
    assert dataclasses.asdict(made) == dataclasses.asdict(expected)
    assert views == [("env", 3)]
    # and a process NVML gave no utilization for, nor an environment
    bare = facts._replace(environment=None)
    (alone,) = _gpu_processes(3, (nvml,), {}, {4242: bare}, view)  # type: ignore[arg-type]
    assert (alone.sm_util_percent, alone.memory_util_percent, alone.cuda) == (None, None, None)
