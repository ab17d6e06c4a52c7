"""`gputop run` on MIG instances: named by MIG UUID or GPU:DEVICE, pinned by MIG UUID.

The ``mig`` scenario: GPU 0 (A100 80GB) in MIG mode with devices 0 (3g.40gb, ana's job),
1 (2g.20gb, idle) and 2 (1g.10gb, ben's notebook); GPU 1 a whole A100; driver 550.90.07,
before R570, so a CUDA process enumerates one MIG device only.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.jobs import all_jobs, job, probe_command, read_probe, wait_until_waiting

from gputop.cli.main import main

MIG_0 = "MIG-420ed452-1550-dcdc-1ac3-896098f71881"
MIG_1 = "MIG-4fd95d93-9b6c-cbc0-9143-9fb3322c58bd"
MIG_2 = "MIG-a13e59d2-2a9b-e1ae-eda6-91dfbd49f7ce"


def run_on_mig(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["run", "--fake", "mig", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", ["0:1", "MIG-4fd95d93", MIG_1, "mig-4FD95D93"])
def test_a_mig_instance_is_pinned_by_its_full_mig_uuid(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    code, printed, _ = run_on_mig(capsys, "--gpus", name, "--", *probe_command(tmp_path / "p"))
    assert code == 0
    assert f"cuda:0 → GPU 0:1 (MIG 2g.20gb)  {MIG_1}" in printed
    env = read_probe(tmp_path / "p")["env"]
    assert env["CUDA_VISIBLE_DEVICES"] == MIG_1
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    (recorded,) = all_jobs(state_dir)
    assert recorded.physical_indices == (0,) and recorded.uuids == (MIG_1,)
    assert recorded.env["CUDA_VISIBLE_DEVICES"] == MIG_1


def test_a_mig_instance_and_a_whole_gpu_keep_the_order_given(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_on_mig(capsys, "--gpus", "1,0:1", "--", "true")
    assert code == 0
    recorded = job(state_dir, 1)
    assert recorded.env["CUDA_VISIBLE_DEVICES"].split(",")[1] == MIG_1
    # Before R570 a MIG device hides the whole GPUs: the preview says what the job sees.
    assert "sees a single MIG instance" in err
    assert recorded.uuids == (MIG_1,)


def test_two_instances_before_r570_warn_that_the_job_sees_only_the_first(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, printed, err = run_on_mig(capsys, "--gpus", "0:1,0:2", "--", "true")
    assert code == 0
    assert job(state_dir, 1).env["CUDA_VISIBLE_DEVICES"] == f"{MIG_1},{MIG_2}"
    assert (
        "gputop: warning: With driver R550 (before R570) a CUDA process sees a single MIG "
        f"instance: {MIG_1}"
    ) in err
    assert "cuda:1" not in printed


@pytest.mark.parametrize(
    ("gpus", "message"),
    [
        ("0:7", "GPU 0 has no MIG device 7"),
        ("1:0", "GPU 1 is not in MIG mode"),
        ("5:0", "There is no GPU 5"),
        ("0:x", "write GPU:DEVICE with two numbers"),
        ("0:١", "write GPU:DEVICE with two numbers"),  # an Arabic-Indic digit one
        ("MIG-ffff", "No MIG device has a UUID starting with 'MIG-ffff'"),
        ("0:1,MIG-4fd9", "is given twice"),
        ("0", "GPU 0 is in MIG mode: choose one of its MIG instances instead"),
    ],
)
def test_bad_mig_targets_are_refused_with_a_reason(
    state_dir: Path, capsys: pytest.CaptureFixture[str], gpus: str, message: str
) -> None:
    code, printed, err = run_on_mig(capsys, "--gpus", gpus, "--", "true")
    assert code != 0 and message in err and "Traceback" not in err
    assert printed == "" and all_jobs(state_dir) == []


def test_waiting_for_an_instance_another_user_runs_on_names_that_instance(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run_on_mig(capsys, "--gpus", "0:2", "--wait", "--", "true")
    assert code == 0
    waiting = wait_until_waiting(state_dir, 1)
    assert waiting.note is not None
    assert "GPU 0:2 (MIG 1g.10gb): 1 process(es) of ben" in waiting.note
