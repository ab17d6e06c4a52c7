"""The exporter's metrics from one sample: bounded, summed, labelled with jobs, counted.

Each test samples a scenario through the one sampler and reads the collector's exposition
back with prometheus_client's parser. The real server and Prometheus are in
test_exporter_prometheus.py and test_exporter_cli.py. See docs/exporter.md.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import replace

import psutil
import pytest
from helpers.exporter import exposition, samples
from helpers.scenarios import minimal_gpu
from helpers.waiting import wait_for

from gputop.core.exporter.collector import SnapshotCollector, sample_until
from gputop.core.exporter.labels import MAX_LABEL_CHARS, command_label, label
from gputop.core.model import Snapshot
from gputop.core.sampling.nvml_backend import NvmlBackend

MIB = 1 << 20


def collected(snapshot: Snapshot, top: int = 20) -> SnapshotCollector:
    collector = SnapshotCollector(top=top)
    collector.record(snapshot, 0.01)
    return collector


def test_at_most_top_processes_per_gpu_and_the_rest_summed_exactly(
    fake_backend: Callable[..., NvmlBackend],
) -> None:
    snapshot = fake_backend("dgx-h100").sample()
    collector = collected(snapshot, top=5)
    kept = samples(collector, "gputop_process_memory_used_bytes")
    others = {s.labels["gpu"]: s.value for s in samples(collector, "gputop_gpu_other_processes")}
    other_memory = {
        s.labels["gpu"]: s.value
        for s in samples(collector, "gputop_gpu_other_processes_memory_used_bytes")
    }
    assert sum(len(gpu.processes) for gpu in snapshot.gpus) == 200
    for gpu in snapshot.gpus:
        index = str(gpu.physical_index)
        mine = [s for s in kept if s.labels["gpu"] == index]
        everything = sorted((p.used_memory_bytes or 0 for p in gpu.processes), reverse=True)
        assert len(mine) == min(5, len(gpu.processes))
        assert sorted((s.value for s in mine), reverse=True) == everything[:5]
        assert others[index] == len(gpu.processes) - len(mine)
        assert other_memory[index] == sum(everything[5:])


def test_users_are_summed_over_every_process_not_only_the_kept(
    fake_backend: Callable[..., NvmlBackend],
) -> None:
    snapshot = fake_backend("dgx-h100").sample()
    totals = {
        s.labels["user"]: s.value
        for s in samples(collected(snapshot, top=1), "gputop_user_memory_used_bytes")
    }
    expected: dict[str, float] = {}
    for gpu in snapshot.gpus:
        for process in gpu.processes:
            user = process.user or ""
            expected[user] = expected.get(user, 0) + (process.used_memory_bytes or 0)
    assert totals == expected


def test_a_lost_gpu_is_counted_and_marked(fake_backend: Callable[..., NvmlBackend]) -> None:
    collector = collected(fake_backend("faulty", at_s=30.0).sample())
    lost = {s.labels["gpu"]: s.value for s in samples(collector, "gputop_gpu_lost")}
    assert lost == {"0": 0.0, "1": 0.0, "2": 1.0}
    assert [s.value for s in samples(collector, "gputop_gpus_lost")] == [1.0]
    temperatures = samples(collector, "DCGM_FI_DEV_GPU_TEMP")
    assert "2" not in {s.labels["gpu"] for s in temperatures}  # no reading, no series


def test_entries_with_impossible_pids_are_counted_per_gpu(
    scenario_file: Callable[..., str], fake_backend: Callable[..., NvmlBackend]
) -> None:
    def process(pid: int) -> dict[str, object]:
        return {"pid": pid, "used_memory_mib": 10, "type": "C", "user": "u", "cmd": ["x"]}

    path = scenario_file([minimal_gpu(processes=[process(0), process(2**31), process(4400001)])])
    collector = collected(fake_backend(path).sample())
    assert [s.value for s in samples(collector, "gputop_gpu_processes_dropped")] == [2.0]
    assert [s.value for s in samples(collector, "gputop_gpu_processes")] == [1.0]


def test_failed_samples_are_counted_and_the_last_good_one_still_served(
    fake_backend: Callable[..., NvmlBackend],
) -> None:
    backend = fake_backend("demo")
    calls: list[int] = []
    said: list[str] = []
    stop = threading.Event()

    def sample() -> Snapshot:
        calls.append(1)
        if len(calls) == 1:
            return backend.sample()
        if len(calls) == 4:
            stop.set()
        raise RuntimeError("NVML went away\x1b]0;title\x07")

    collector = SnapshotCollector()
    sample_until(sample, collector, 0.0, stop, said.append)
    assert [s.value for s in samples(collector, "gputop_sampling_errors_total")] == [3.0]
    assert [s.value for s in samples(collector, "gputop_samples_total")] == [1.0]
    assert samples(collector, "DCGM_FI_DEV_GPU_UTIL")
    assert len(said) == 1  # said once, not at every interval
    assert "NVML went away" in said[0]


def test_a_gpu_read_that_failed_counts_as_a_sampling_error(
    fake_backend: Callable[..., NvmlBackend],
) -> None:
    snapshot = fake_backend("demo").sample()
    broken = replace(snapshot, gpus=(replace(snapshot.gpus[0], sample_error="boom"),))
    collector = collected(broken)
    assert [s.value for s in samples(collector, "gputop_sampling_errors_total")] == [1.0]
    assert [s.value for s in samples(collector, "gputop_gpu_sample_error")] == [1.0]


def test_no_sample_yet_means_no_metrics() -> None:
    assert exposition(SnapshotCollector()) == ""


@pytest.mark.usefixtures("host_pid_namespace")
def test_a_process_is_labelled_with_its_gputop_job_and_never_a_forged_slurm_job(
    scenario_file: Callable[..., str], fake_backend: Callable[..., NvmlBackend]
) -> None:
    env = {**os.environ, "GPUTOP_JOB_ID": "17", "SLURM_JOB_ID": "4242"}
    child = subprocess.Popen(["sleep", "60"], env=env)
    try:
        # Popen returns before the kernel has set out the child's arguments and environment
        # (both read empty then): sampled once its environment reads, so the forged
        # SLURM_JOB_ID below was there to be read, and refused.
        environ = psutil.Process(child.pid).environ
        wait_for(lambda: environ().get("GPUTOP_JOB_ID") == "17", "the child's environment")
        process = {"pid": child.pid, "used_memory_mib": 100, "type": "C", "sm_util": 50}
        other = {"pid": 4400009, "used_memory_mib": 50, "type": "C", "user": "x", "cmd": ["y"]}
        path = scenario_file([minimal_gpu(processes=[process, other])])
        collector = collected(fake_backend(path).sample())
        by_pid = {
            s.labels["pid"]: s.labels
            for s in samples(collector, "gputop_process_memory_used_bytes")
        }
    finally:
        child.kill()
        child.wait()
    assert by_pid[str(child.pid)]["gputop_job"] == "17"
    # No Slurm says job 4242 is this user's, and no Slurm cgroup holds it: SLURM_JOB_ID is
    # anyone's to set (gputop/core/slurm/cgroup.py). It labelled the process before.
    assert by_pid[str(child.pid)]["slurm_job"] == ""
    assert by_pid[str(child.pid)]["command"] == "sleep 60"
    assert (by_pid["4400009"]["gputop_job"], by_pid["4400009"]["slurm_job"]) == ("", "")


def test_label_values_are_cleaned_and_bounded() -> None:
    assert label("a\x1b]0;t\x07\nb") == "a\\e]0;t\\x07\\nb"
    assert label(None) == ""
    huge = label("\x1b" * 10_000)
    assert len(huge) == MAX_LABEL_CHARS and huge.endswith("…")
    command = command_label(("python", *["--flag=" + "x" * 50] * 100_000))
    assert len(command) == MAX_LABEL_CHARS  # filled with what is shown once redacted
    assert command.startswith("python --flag=*** --flag=***")
    command = command_label(("python", *["--flag=x/" + "x" * 50] * 100_000))
    assert len(command) == MAX_LABEL_CHARS
    assert command.startswith("python --flag=x/xxx")
    assert command_label(("a", "b/x\nc.py")) == "a b/x\\nc.py"
