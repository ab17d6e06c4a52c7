"""Inside a Slurm allocation, ``gputop map`` explains Slurm's cards → CUDA_VISIBLE_DEVICES →
cuda:N (docs/slurm.md): in real jobs of the one-node cluster, and on simulated nodes where
NVML sees only the job's cards (a device cgroup) or every card."""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from helpers.scenarios import minimal_gpu
from helpers.slurm_cluster import GPU_COUNT, SlurmCluster

from gputop.cli.main import main

DEADLINE_S = 60.0


def gputop_map(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fake: str, **env: str
) -> dict[str, Any]:
    for name in ("SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["map", "--fake", fake, "--no-torch", "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_in_each_real_job_gputop_names_the_card_slurm_gave_it(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    script = tmp_path / "map.sh"
    argv = [sys.executable, "-m", "gputop", "map", "--fake", "v100x4", "--no-torch", "--json"]
    # Each job keeps its card until the test has read all four: one that ended first gave
    # its card back, and a job submitted after it got the same one (CI saw cards 0, 0, 1, 2).
    release = tmp_path / "release"
    script.write_text(
        "#!/bin/sh\necho JOB_GPUS=$SLURM_JOB_GPUS >&2\n"
        + shlex.join(argv)
        + f"\nn=0\nwhile [ ! -e {shlex.quote(str(release))} ] && [ $n -lt 600 ]; do"
        + " sleep 0.1; n=$((n+1)); done\n"
    )
    outputs = [tmp_path / f"map-{n}.json" for n in range(GPU_COUNT)]
    for output in outputs:
        slurm.command(
            "sbatch",
            "--gpus=1",
            f"--chdir={REPO}",
            f"--output={output}",
            f"--error={output}.err",
            str(script),
        )

    def documents() -> list[dict[str, Any]] | None:
        try:
            return [json.loads(output.read_text()) for output in outputs]
        except (OSError, ValueError):
            return None

    deadline = time.monotonic() + DEADLINE_S
    found = documents()
    while found is None and time.monotonic() < deadline:
        time.sleep(0.2)
        found = documents()
    assert found is not None, "the jobs did not all print gputop map's JSON"
    cards = []
    for output, document in zip(outputs, found, strict=True):
        given = int(Path(f"{output}.err").read_text().split("=")[1])
        allocation = document["slurm"]
        assert allocation["slurm_gpus"] == [given]
        assert [(d["logical_index"], d["node_index"]) for d in allocation["devices"]] == [
            (0, given)
        ]
        assert document["devices"][0]["physical_index"] == given
        cards.append(given)
    assert sorted(cards) == list(range(GPU_COUNT))  # the four held their cards at once
    release.touch()


def test_where_nvml_sees_only_the_jobs_cards_cuda_n_is_traced_to_the_nodes_gpu(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    scenario_file: Callable[..., str],
) -> None:
    two_cards = scenario_file(
        [
            minimal_gpu(
                uuid="GPU-aaaaaaaa-0000-0000-0000-000000000001", pci_bus_id="00000000:07:00.0"
            ),
            minimal_gpu(
                uuid="GPU-bbbbbbbb-0000-0000-0000-000000000002", pci_bus_id="00000000:0F:00.0"
            ),
        ]
    )
    document = gputop_map(
        capsys,
        monkeypatch,
        two_cards,
        SLURM_JOB_ID="88",
        SLURM_JOB_GPUS="1,3",
        CUDA_VISIBLE_DEVICES="0,1",
    )

    allocation = document["slurm"]
    assert allocation["renumbered"] is True
    assert [
        (d["logical_index"], d["nvml_index"], d["node_index"]) for d in allocation["devices"]
    ] == [
        (0, 0, 1),
        (1, 1, 3),
    ]
    assert any("GPU 0 here is the node's GPU 1" in w for w in allocation["warnings"])


def test_cards_outside_the_allocation_are_flagged_when_cuda_visible_devices_is_unset(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    document = gputop_map(capsys, monkeypatch, "v100x4", SLURM_JOB_ID="9", SLURM_JOB_GPUS="2")

    allocation = document["slurm"]
    assert [d["node_index"] for d in allocation["devices"] if not d["slurm_gave_it"]] == [0, 1, 3]
    assert any("CUDA_VISIBLE_DEVICES is not set" in w for w in allocation["warnings"])


def test_a_step_s_cards_are_read_before_the_job_s(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    document = gputop_map(
        capsys,
        monkeypatch,
        "v100x4",
        SLURM_JOB_ID="9",
        SLURM_JOB_GPUS="1,2",
        SLURM_STEP_GPUS="2",
        CUDA_VISIBLE_DEVICES="2",
    )

    assert (document["slurm"]["variable"], document["slurm"]["slurm_gpus"]) == (
        "SLURM_STEP_GPUS",
        [2],
    )


def test_outside_an_allocation_there_is_no_slurm_section(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert gputop_map(capsys, monkeypatch, "v100x4")["slurm"] is None
