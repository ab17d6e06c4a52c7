"""`gputop map`: which card each cuda:N is, as a person or a script reads it."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from helpers.scenarios import minimal_gpu

from gputop.cli.main import main


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "30")
    for name in ("GPUTOP_FAKE", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(name, raising=False)


def run_map(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["map", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_map_reads_the_current_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,1")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    code, out, _ = run_map(capsys, "--fake", "mixed")
    assert code == 0
    assert "CUDA_VISIBLE_DEVICES=2,1" in out
    assert "cuda:0 → GPU 2  Tesla T4" in out
    assert "cuda:1 → GPU 1  NVIDIA A100-SXM4-40GB" in out


def test_visible_and_order_options_override_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    _, out, _ = run_map(capsys, "--fake", "mixed", "--visible", "0", "--order", "PCI_BUS_ID")
    assert "cuda:0 → GPU 0  NVIDIA GeForce RTX 3060" in out


def test_the_default_order_on_a_mixed_box_warns(capsys: pytest.CaptureFixture[str]) -> None:
    """mixed: the simulated CUDA gives each card's SM count, so fastest-first is estimated,
    and it is not nvidia-smi's order (issue 28): index 0 is the H100, GPU 3."""
    _, out, _ = run_map(capsys, "--fake", "mixed", "--visible", "0")
    assert "cuda:0 → GPU 3  NVIDIA H100 PCIe" in out
    assert "warning: CUDA_DEVICE_ORDER is unset, so CUDA numbers GPUs fastest first" in out
    _, out, _ = run_map(capsys, "--fake", "mixed")
    order = [
        line.split()[3] for line in out.splitlines() if line.startswith("cuda:") and "→" in line
    ]
    assert order == ["3", "1", "0", "2"]  # not nvidia-smi's 0, 1, 2, 3


def test_without_sm_counts_the_default_order_is_said_to_be_uncertain(
    capsys: pytest.CaptureFixture[str], scenario_file: Callable[..., str]
) -> None:
    # NVML gives no SM count for a whole GPU, so without the driver probe (and a scenario
    # that gives none) the speed order cannot be estimated: nvidia-smi's order is assumed,
    # and said to be uncertain.
    gpus = [
        minimal_gpu(name="NVIDIA GeForce RTX 3060", cuda_compute_capability=[8, 6]),
        minimal_gpu(
            name="NVIDIA H100 PCIe",
            uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000",
            pci_bus_id="00000000:08:00.0",
            cuda_compute_capability=[9, 0],
        ),
    ]
    for gpu in gpus:
        del gpu["multiprocessor_count"]
    _, out, _ = run_map(capsys, "--fake", scenario_file(gpus), "--visible", "0")
    assert "cuda:0 → GPU 0  NVIDIA GeForce RTX 3060" in out
    assert "warning: CUDA_DEVICE_ORDER is unset" in out
    assert "cannot be sure" in out


def test_a_value_hiding_every_gpu_is_an_answer_not_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_map(capsys, "--fake", "v100x4", "--visible", "0,0", "--json")
    document = json.loads(out)
    assert code == 0 and err == ""
    assert document["devices"] == []
    assert any("both name GPU 0" in w for w in document["warnings"])


def test_json_has_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_map(capsys, "--fake", "mig", "--visible", "MIG-4fd95d93", "--json")
    document = json.loads(out)
    assert set(document) == {
        "cuda_visible_devices", "cuda_device_order", "devices", "warnings", "verified_by",
        "torch", "order_source", "driver_devices", "slurm", "source", "rules_devices",
        "rules_error",
    }  # fmt: skip
    (device,) = document["devices"]
    assert set(device) == {"logical_index", "physical_index", "uuid", "name", "mig_uuid"}
    assert device["physical_index"] == 0
    assert device["mig_uuid"].startswith("MIG-4fd95d93")
    assert document["verified_by"] == "rules"
    assert document["torch"] is None
    assert document["order_source"] == "estimate"
    assert document["driver_devices"] is None
    assert document["source"] == "rules" and document["rules_error"] is None
    assert document["rules_devices"] == document["devices"]


def test_a_simulated_mixed_box_says_its_order_is_an_estimate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run_map(capsys, "--fake", "mixed")
    assert "order: fastest first, estimated by gputop (these GPUs are simulated)" in out


def test_pci_bus_order_is_not_called_an_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_map(capsys, "--fake", "mixed", "--order", "PCI_BUS_ID")
    assert "order: PCI bus order" in out and "estimated" not in out


def test_simulated_gpus_are_not_checked_against_the_real_driver(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run_map(capsys, "--fake", "v100x4")
    assert "driver: not asked: these GPUs are simulated" in out


def test_on_real_nvml_the_driver_probe_and_torch_probe_answer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real-driver path with NVML simulated: the probes must say what they found."""
    from gputop.core.fake import load_fake_nvml
    from gputop.core.sampling import source

    fake = load_fake_nvml("v100x4", 30.0)
    monkeypatch.setattr(
        source, "_open_real", lambda options: source._open_fake("v100x4", 30.0, options)
    )
    del fake
    code, out, _ = run_map(capsys, "--visible", "1", "--python", "/nonexistent/python3")
    assert code == 0
    assert "driver: not checked" in out  # no libcuda on this machine
    assert "torch: no interpreter /nonexistent/python3 found" in out


@pytest.mark.parametrize("visible", ["MIG-4fd95d93-9b6c-cbc0-9143-9fb3322c58bd", "0,MIG-4fd95d93"])
def test_torchs_helpers_and_mig_are_one_warning_in_one_wording(
    capsys: pytest.CaptureFixture[str], visible: str
) -> None:
    code, out, _ = run_map(capsys, "--fake", "mig", "--visible", visible, "--no-torch")
    assert code == 0
    said = [line for line in out.splitlines() if "cannot map MIG devices" in line]
    assert said == ["warning: torch's NVML-based helpers cannot map MIG devices."], out
