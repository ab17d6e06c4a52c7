"""`gputop map` and the PyTorch view where the CUDA driver answers: its enumeration is the
mapping shown, and a disagreement is the rules' error.

NVML is simulated (v100x4, through the real-driver path); the CUDA driver is a libcuda.so.1
compiled from C at test time (tests/helpers/fake_libcuda.py), loaded by the probe's real child.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.fake_libcuda import build_fake_libcuda, devices_spec
from helpers.scenarios import minimal_gpu

from gputop.cli import map_command, run_command
from gputop.cli.main import main
from gputop.core.probes import DriverProbe
from gputop.core.probes.background import BackgroundDriverProbe
from gputop.core.sampling import source
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.process_env import CudaViews, read_cuda_environment

V100 = [
    "GPU-5a9e5b38-bd6d-2f23-3b22-d42f6e26aa55",
    "GPU-96870f72-ff47-4de2-1bb0-99f7d8338c12",
    "GPU-f892c819-e030-1568-a2c9-521972500816",
    "GPU-80af15aa-d49f-aed3-cd11-01700346d7d9",
]
NVML_BUSES = ["0000:00:1B.0", "0000:00:1C.0", "0000:00:1D.0", "0000:00:1E.0"]


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_fake_libcuda(tmp_path_factory.mktemp("libcuda"))


@pytest.fixture(autouse=True)
def real_path_on_simulated_nvml(monkeypatch: pytest.MonkeyPatch, libcuda: str) -> None:
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "30")
    for name in ("GPUTOP_FAKE", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "FAKE_CUDA_FAIL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(
        source, "_open_real", lambda options: source._open_fake("v100x4", 30.0, options)
    )
    monkeypatch.setattr(map_command, "DriverProbe", functools.partial(DriverProbe, library=libcuda))


def driver_buses(monkeypatch: pytest.MonkeyPatch, buses: list[str]) -> None:
    spec = devices_spec(*((uuid, 80, bus) for uuid, bus in zip(V100, buses, strict=True)))
    monkeypatch.setenv("FAKE_CUDA_DEVICES", spec)


def run_map(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["map", "--no-torch", *argv]) == 0
    return capsys.readouterr().out


def test_where_the_driver_agrees_its_list_is_shown_and_said_to_be_its(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    driver_buses(monkeypatch, NVML_BUSES)
    out = run_map(capsys, "--visible", "2,0", "--order", "PCI_BUS_ID")
    assert "cuda:N as the CUDA driver enumerates them:" in out
    assert "cuda:0 → GPU 2" in out and "cuda:1 → GPU 0" in out
    assert "driver: verified by the CUDA driver (2 device(s))" in out


def test_where_the_driver_disagrees_its_list_is_the_mapping_and_the_rules_are_wrong(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver's PCI bus ids put GPU 3 first: its PCI_BUS_ID order is not NVML's.
    driver_buses(monkeypatch, list(reversed(NVML_BUSES)))
    out = run_map(capsys, "--visible", "0", "--order", "PCI_BUS_ID")
    assert "cuda:0 → GPU 3" in out and "cuda:0 → GPU 0 " not in out
    assert (
        "driver: gputop's rules were wrong here: they predicted cuda:0 → GPU 0; the CUDA "
        "driver enumerates cuda:0 → GPU 3, and that is what a program gets." in out
    )
    document = json.loads(run_map(capsys, "--visible", "0", "--order", "PCI_BUS_ID", "--json"))
    assert document["source"] == "driver" and document["verified_by"] == "rules"
    assert [d["physical_index"] for d in document["devices"]] == [3]
    assert [d["physical_index"] for d in document["rules_devices"]] == [0]
    assert document["rules_error"].startswith("gputop's rules were wrong here")


def test_where_the_driver_cannot_answer_the_rules_predict(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    driver_buses(monkeypatch, NVML_BUSES)
    monkeypatch.setenv("FAKE_CUDA_FAIL", "cuInit:999")
    out = run_map(capsys, "--visible", "1", "--order", "PCI_BUS_ID")
    assert "cuda:N as gputop's rules predict them:" in out and "cuda:0 → GPU 1" in out
    assert "driver: not checked" in out


async def test_the_pytorch_view_shows_the_drivers_list_and_the_rules_error(
    monkeypatch: pytest.MonkeyPatch, libcuda: str
) -> None:
    from helpers.dashboard import first_sample, make_app, plain_text
    from textual.widgets import Static

    from gputop.tui.widgets import torch_panel

    driver_buses(monkeypatch, list(reversed(NVML_BUSES)))
    monkeypatch.setattr(torch_panel, "DriverProbe", functools.partial(DriverProbe, library=libcuda))
    environ = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    app = make_app("v100x4", environ=environ, probes=True, python="/nonexistent/python3")
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        body = app.query_one("#torch-body", Static)
        for _ in range(300):
            text = plain_text(body, width=150)
            if "torch:" in text and "checking" not in text:
                break
            await pilot.pause(0.1)
        assert re.search(r"cuda:0 +3 +Tesla V100", text)  # the mapping: the driver's cuda:0
        assert "gputop's rules were wrong here: they predicted cuda:0 → GPU 0" in text


def run_launch(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    assert main(["run", *argv]) == 0
    out, err = capsys.readouterr()
    return out, err


def test_a_launch_shows_the_drivers_enumeration_of_its_pinning(
    state_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    libcuda: str,
) -> None:
    driver_buses(monkeypatch, NVML_BUSES)
    monkeypatch.setattr(run_command, "DriverProbe", functools.partial(DriverProbe, library=libcuda))
    out, err = run_launch(capsys, "--gpus", "3,1", "--", sys.executable, "-c", "pass")
    assert "as the CUDA driver enumerates them:" in out
    assert "cuda:0 → GPU 3" in out and "cuda:1 → GPU 1" in out
    assert "rules were wrong" not in err


def test_a_launch_the_driver_numbers_differently_shows_its_cards_and_the_rules_error(
    state_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    libcuda: str,
) -> None:
    # deepspeed is pinned by index (3,1 under PCI_BUS_ID); this driver's bus order is reversed.
    driver_buses(monkeypatch, list(reversed(NVML_BUSES)))
    monkeypatch.setattr(run_command, "DriverProbe", functools.partial(DriverProbe, library=libcuda))
    out, err = run_launch(capsys, "--gpus", "3,1", "--", "deepspeed", "train.py")
    assert "as the CUDA driver enumerates them:\n  cuda:0 → GPU 0" in out
    assert "cuda:1 → GPU 2" in out
    assert (
        "gputop: warning: gputop's rules were wrong here: they predicted cuda:0 → GPU 3, "
        "cuda:1 → GPU 1; the CUDA driver enumerates cuda:0 → GPU 0, cuda:1 → GPU 2" in err
    )


def test_a_processs_own_mapping_is_the_drivers_once_it_has_answered(
    monkeypatch: pytest.MonkeyPatch,
    libcuda: str,
    start_process: Callable[..., subprocess.Popen[str]],
    scenario_file: Callable[..., str],
    fake_backend: Callable[..., NvmlBackend],
) -> None:
    # It asked for GPU 0 in PCI order and NVML shows it there; but this driver's PCI order
    # is reversed, so its cuda:0 is GPU 3: it runs on a card its own list excludes.
    driver_buses(monkeypatch, list(reversed(NVML_BUSES)))
    process = start_process(CUDA_VISIBLE_DEVICES="0", CUDA_DEVICE_ORDER="PCI_BUS_ID")
    gpus = [
        minimal_gpu(
            uuid=uuid,
            pci_bus_id=f"0000{bus}",
            processes=[{"pid": process.pid, "used_memory_mib": 100}] if index == 0 else [],
        )
        for index, (uuid, bus) in enumerate(zip(V100, NVML_BUSES, strict=True))
    ]
    snapshot = fake_backend(scenario_file(gpus)).sample()
    (by_rules,) = snapshot.gpus[0].processes
    assert by_rules.cuda is not None and by_rules.cuda.devices == (0,)
    assert not by_rules.cuda.mismatch and not by_rules.cuda.devices_from_driver
    environments = {process.pid: read_cuda_environment(process.pid)}
    background = BackgroundDriverProbe(DriverProbe(library=libcuda))
    deadline = time.monotonic() + 30
    while background.answer("0", "PCI_BUS_ID") is None:  # asked once, answered in the back
        assert time.monotonic() < deadline, "the driver probe never answered"
        time.sleep(0.05)
    gpus_seen = CudaViews().attach(
        snapshot.gpus, environments, snapshot.driver_version, background.answer
    )
    (by_driver,) = gpus_seen[0].processes
    assert by_driver.cuda is not None and by_driver.cuda.devices == (3,)
    assert by_driver.cuda.devices_from_driver and by_driver.cuda.mismatch
