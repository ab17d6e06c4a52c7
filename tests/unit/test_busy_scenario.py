"""The bench's busy server (tests/bench/busy_scenario.py, issues 29 and 44) is what it says:
every card reading moves every second, each process's SM % and GPU memory too (an allocator
grows and shrinks), and each process carries its own CUDA variables."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

from helpers import REPO

from gputop.core.model import GpuSample
from gputop.core.sampling.source import open_backend

BENCH = REPO / "tests" / "bench"
sys.path.insert(0, str(BENCH))

from busy_scenario import busy  # noqa: E402

DGX = REPO / "gputop" / "core" / "fake" / "scenarios"


def readings(gpu: GpuSample) -> dict[str, object]:
    return {
        "util": gpu.utilization_gpu_percent,
        "memory": gpu.memory_used_bytes,
        "power": gpu.power_w,
        "temperature": gpu.temperature_c,
        "sm clock": gpu.clocks.sm_mhz,
        "memory clock": gpu.clocks.memory_mhz,
    }


def test_every_card_reading_moves_every_second_and_processes_carry_their_variables(
    tmp_path: Path,
) -> None:
    scenario = busy(json.loads((DGX / "dgx-h100.json").read_text()))
    path = tmp_path / "busy.json"
    path.write_text(json.dumps(scenario))
    backend = open_backend(str(path), environ={"GPUTOP_FAKE_TIME": "1000"})
    try:
        nvml = backend.nvml  # type: ignore[attr-defined]
        samples = []
        for step in range(4):
            nvml.set_time(1000.0 + step)
            samples.append(backend.sample())
    finally:
        backend.close()
    for name in readings(samples[0].gpus[0]):
        moved = sum(
            readings(before)[name] != readings(after)[name]
            for first, second in itertools.pairwise(samples)
            for before, after in zip(first.gpus, second.gpus, strict=True)
        )
        share = 0.5 if name == "temperature" else 0.75  # whole degrees: a step may round away
        assert moved >= share * 3 * len(samples[0].gpus), f"{name} moved only {moved} times"
    sm = [[p.sm_util_percent for g in s.gpus for p in g.processes] for s in samples]
    pairs = [
        (a, b)
        for first, second in itertools.pairwise(sm)
        for a, b in zip(first, second, strict=True)
    ]
    assert len(pairs) == 3 * 200 and sum(a != b for a, b in pairs) >= 0.5 * len(pairs)
    memory = [[p.used_memory_bytes for g in s.gpus for p in g.processes] for s in samples]
    moves = [
        abs(b - a) / a
        for first, second in itertools.pairwise(memory)
        for a, b in zip(first, second, strict=True)
        if a and b
    ]
    # By a percent or so a second, most of them (a slow drift alone moves 0.03 %).
    assert len(moves) == 3 * 200 and sum(move >= 0.005 for move in moves) >= 0.6 * len(moves)
    assert max(moves) <= 0.06  # a few percent at most: grows and shrinks, never doubles
    processes = [p for gpu in scenario["gpus"] for p in gpu["processes"]]
    with_cvd = [p for p in processes if "CUDA_VISIBLE_DEVICES" in p["env"]]
    assert len(with_cvd) >= 0.8 * len(processes)
    assert len({p["env"]["CUDA_VISIBLE_DEVICES"] for p in with_cvd}) >= 8
    assert all(
        p["used_memory_mib"]["amp"] <= 0.01 * p["used_memory_mib"]["base"] + 1e-9
        and p["used_memory_mib"]["jitter_period"] == 1
        for p in processes
        if isinstance(p.get("used_memory_mib"), dict)
    )
