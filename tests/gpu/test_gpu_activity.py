"""Activity (NVML GPM) on Hopper and newer: a bf16 matrix-product loop shows SM and tensor
activity high, an idle card low, a copy loop DRAM high. Skipped, with the reason, where
gputop's snapshot --json has no ``activity`` object or the card is older than Hopper."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu.driver import DRIVER

if not DRIVER.present:
    pytest.skip(DRIVER.reason, allow_module_level=True)

from gpu import compare
from gpu.conftest import wait_for_file

BUSY_SM = 70.0
BUSY_TENSOR = 40.0
BUSY_DRAM = 50.0
IDLE = 5.0
"""Percent: what high and low mean here (docs/real-gpu.md)."""


def _watch(env: dict[str, str], seconds: float) -> list[dict[str, Any]]:
    """``snapshot --json --watch 1`` for ``seconds``: GPM needs two samples, so one-shot
    snapshots may have no activity yet; every document after the first two is returned."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gputop", "snapshot", "--json", "--watch", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    documents = []
    deadline = time.monotonic() + seconds
    try:
        assert process.stdout is not None
        for line in process.stdout:
            documents.append(json.loads(line))
            if time.monotonic() > deadline:
                break
    finally:
        process.terminate()
        process.wait(timeout=30)
    return documents[2:]


@pytest.fixture(scope="module")
def hopper(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The first Hopper-or-newer card without MIG, as snapshot --json gives it."""

    env = {k: v for k, v in os.environ.items() if k != "GPUTOP_FAKE"}
    env["GPUTOP_STATE_DIR"] = str(tmp_path_factory.mktemp("state") / "gputop")
    done = subprocess.run(
        [sys.executable, "-m", "gputop", "snapshot", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    document = json.loads(done.stdout)
    if not any("activity" in gpu for gpu in document["gpus"]):
        pytest.skip("snapshot --json has no activity object: this gputop does not read GPM yet")
    for gpu in document["gpus"]:
        capability = gpu.get("compute_capability") or [0, 0]
        if capability[0] >= 9 and gpu.get("mig_mode") != 1:
            break
    else:
        pytest.skip("no Hopper or newer GPU outside MIG mode here: GPM activity needs one")
    if not _activity(_watch(env, 5), gpu["uuid"], "sm_active_percent"):
        pytest.skip(
            f"GPU {gpu['index']} is Hopper or newer but gputop reads no SM activity on it "
            "(activity null: GPM refused, as in some virtual machines)"
        )
    return {"gpu": gpu, "env": env}


def _activity(documents: list[dict[str, Any]], uuid: str, key: str) -> list[float]:
    values = []
    for document in documents:
        for gpu in document["gpus"]:
            value = (gpu.get("activity") or {}).get(key) if gpu["uuid"] == uuid else None
            if value is not None:
                values.append(float(value))
    return values


@pytest.fixture
def loaded(hopper, probe, tmp_path: Path) -> Iterator[Any]:
    def start(mode: str, seconds: float) -> None:
        ready = tmp_path / f"{mode}.json"
        process = probe(
            mode,
            "--seconds",
            str(seconds),
            "--ready",
            str(ready),
            extra={"CUDA_VISIBLE_DEVICES": hopper["gpu"]["uuid"]},
        )
        wait_for_file(ready, 180, process)

    yield start


def test_activity_idle_card_low(result, hopper) -> None:
    documents = _watch(hopper["env"], 6)
    idle = (
        [
            gpu["uuid"]
            for gpu in documents[-1]["gpus"]
            if not gpu.get("processes")
            and (gpu.get("activity") or {}).get("sm_active_percent") is not None
        ]
        if documents
        else []
    )
    if not idle:
        pytest.skip("no card without processes and with activity: nothing idle to check")
    for uuid in idle:
        for key in ("sm_active_percent", "tensor_active_percent"):
            values = _activity(documents, uuid, key)
            result.comparisons.append(
                compare.Comparison(
                    f"{uuid[:12]} idle {key}",
                    max(values),
                    f"<= {IDLE:g}",
                    "the highest sample",
                    max(values) <= IDLE,
                )
            )
    assert not result.failed, [c.to_json() for c in result.failed]


def test_activity_matmul_tensor_and_sm_high(result, hopper, loaded) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed: the bf16 matrix-product loop needs it")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA (a CPU-only build): the bf16 loop needs it")
    loaded("matmul", 20)
    documents = _watch(hopper["env"], 8)
    uuid = hopper["gpu"]["uuid"]
    for key, floor in (("sm_active_percent", BUSY_SM), ("tensor_active_percent", BUSY_TENSOR)):
        values = _activity(documents, uuid, key)
        result.comparisons.append(
            compare.Comparison(
                f"bf16 matmul {key}",
                max(values, default=None),
                f">= {floor:g}",
                "the highest sample",
                bool(values) and max(values) >= floor,
            )
        )
    assert not result.failed, [c.to_json() for c in result.failed]


def test_activity_copy_loop_dram_high(result, hopper, loaded) -> None:
    loaded("copy", 20)
    documents = _watch(hopper["env"], 8)
    values = _activity(documents, hopper["gpu"]["uuid"], "dram_active_percent")
    result.comparisons.append(
        compare.Comparison(
            "copy loop dram_active_percent",
            max(values, default=None),
            f">= {BUSY_DRAM:g}",
            "the highest sample",
            bool(values) and max(values) >= BUSY_DRAM,
        )
    )
    assert not result.failed, [c.to_json() for c in result.failed]
