"""The real-GPU suite's CUDA process (tests/gpu/cuda_probe.py) and driver check, run here
against the C libcuda imitation (tests/helpers/fake_libcuda.py) with memory calls added: what the
probe enumerates, holds and reports is what that library answers (docs/real-gpu.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gpu import cuda_probe, driver
from helpers.fake_libcuda import MEMORY_SOURCE, SOURCE, devices_spec

PROBE = Path(cuda_probe.__file__)


GPUS = [
    ("GPU-aaaaaaaa-0000-4000-8000-000000000001", 132, "0000:18:00.0"),
    ("GPU-bbbbbbbb-0000-4000-8000-000000000002", 132, "0000:2a:00.0"),
    ("GPU-cccccccc-0000-4000-8000-000000000003", 132, "0000:0a:00.0"),
]


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory: pytest.TempPathFactory) -> str:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("a C compiler (cc or gcc) is needed to build the test libcuda")
    folder = tmp_path_factory.mktemp("libcuda")
    (folder / "libcuda.c").write_text(SOURCE + MEMORY_SOURCE)
    library = folder / "libcuda.so.1"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O0", "-o", str(library), str(folder / "libcuda.c")],
        check=True,
    )
    return str(library)


def probe_env(libcuda: str, **variables: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "FAKE_CUDA_FAIL")
    }
    env.update(GPUTOP_GPU_LIBCUDA=libcuda, FAKE_CUDA_DEVICES=devices_spec(*GPUS))
    env.update(GPUTOP_GPU_PROBE="ctypes")
    env.update(variables)
    return env


def enumerate_with(libcuda: str, **variables: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(PROBE), "enumerate"],
        capture_output=True,
        text=True,
        env=probe_env(libcuda, **variables),
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def hexes(*positions: int) -> list[str]:
    return [GPUS[p][0][4:].replace("-", "") for p in positions]


@pytest.mark.parametrize(
    ("variables", "status", "positions"),
    [
        ({}, "ok", (0, 1, 2)),
        ({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "ok", (2, 0, 1)),
        ({"CUDA_VISIBLE_DEVICES": "2,0"}, "ok", (2, 0)),
        ({"CUDA_VISIBLE_DEVICES": "GPU-bbbbbbbb"}, "ok", (1,)),
        ({"CUDA_VISIBLE_DEVICES": "1,9,0"}, "ok", (1,)),
        ({"CUDA_VISIBLE_DEVICES": ""}, "no-device", ()),
        ({"CUDA_VISIBLE_DEVICES": "-1"}, "no-device", ()),
    ],
)
def test_enumeration_is_what_the_driver_answers(libcuda, variables, status, positions) -> None:
    seen = enumerate_with(libcuda, **variables)
    assert seen == {"status": status, "uuids": hexes(*positions)}


def test_enumeration_reports_the_failing_call(libcuda, tmp_path) -> None:
    seen = enumerate_with(libcuda, FAKE_CUDA_FAIL="cuDeviceGetUuid:999")
    assert seen == {"status": "cuda-error", "call": "cuDeviceGetUuid", "code": 999, "uuids": []}
    missing = enumerate_with(str(tmp_path / "libcuda.so.1"))
    assert missing["status"] == "no-libcuda"


def test_hold_writes_ready_holds_until_stopped_and_reports_release(libcuda, tmp_path) -> None:
    ready, stop, done = tmp_path / "ready.json", tmp_path / "stop", tmp_path / "done.json"
    process = subprocess.Popen(
        [
            sys.executable, str(PROBE), "hold", "--all", "--bytes", str(1 << 20),
            "--ready", str(ready), "--stop", str(stop), "--done", str(done), "--seconds", "120",
        ],
        env=probe_env(libcuda, CUDA_VISIBLE_DEVICES="1,0"),
    )  # fmt: skip
    try:
        from gpu.conftest import wait_for_file

        held = wait_for_file(ready, 60, process)
        assert held["pid"] == process.pid
        assert held["backend"] == "ctypes"
        assert held["bytes"] == 1 << 20
        assert held["devices"] == 2
        assert held["enumeration"] == {"status": "ok", "uuids": hexes(1, 0)}
        assert held["allocated_at"] <= held["held_at"]
        assert process.poll() is None  # still holding
        stop.touch()
        assert process.wait(timeout=60) == 0
        assert json.loads(done.read_text())["released_at"] >= held["held_at"]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_hold_says_why_when_the_allocation_fails(libcuda, tmp_path) -> None:
    ready = tmp_path / "ready.json"
    done = subprocess.run(
        [sys.executable, str(PROBE), "hold", "--bytes", "1024", "--ready", str(ready)],
        env=probe_env(libcuda, FAKE_CUDA_FAIL="cuMemAlloc:2"),
        timeout=60,
        check=False,
    )
    assert done.returncode == 3
    assert json.loads(ready.read_text())["error"] == "cuMemAlloc returned CUresult 2"


def test_copy_loop_copies_until_its_time_is_up(libcuda) -> None:
    done = subprocess.run(
        [sys.executable, str(PROBE), "copy", "--seconds", "0.2", "--bytes", "4096"],
        capture_output=True,
        text=True,
        env=probe_env(libcuda),
        timeout=60,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["copies"] >= 8
    assert report["bytes_each"] == 4096


def test_cuda_version_read_from_the_library(libcuda, monkeypatch) -> None:
    monkeypatch.setenv("GPUTOP_GPU_LIBCUDA", libcuda)
    assert cuda_probe.cuda_driver_version() == 12040
    monkeypatch.setenv("GPUTOP_GPU_LIBCUDA", "/nonexistent/libcuda.so.1")
    assert cuda_probe.cuda_driver_version() is None


def test_nvcc_probe_builds_and_fails_cleanly_without_a_driver(tmp_path) -> None:
    """The CUDA C backend compiles where nvcc is; without a driver it exits 3, no ready file."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    if driver.detect().present:
        pytest.skip("a driver is here: the real-GPU suite runs this backend for real")
    (tmp_path / "hold.cu").write_text(cuda_probe.NVCC_SOURCE)
    binary = tmp_path / "hold"
    subprocess.run(["nvcc", "-o", str(binary), str(tmp_path / "hold.cu")], check=True, timeout=300)
    ready = tmp_path / "ready.json"
    done = subprocess.run(
        [str(binary), "1024", "1", "1", str(ready), "", "", '{"status": "ok", "uuids": []}'],
        timeout=60,
        check=False,
    )
    assert done.returncode == 3
    assert not ready.exists()
    assert subprocess.run([str(binary)], check=False, timeout=60).returncode == 2


def test_driver_check_says_why_there_is_none(tmp_path, monkeypatch) -> None:
    missing = driver.detect(str(tmp_path / "libnvidia-ml.so.1"))
    assert not missing.present
    assert missing.reason.startswith("no NVIDIA driver: ")
    assert "cannot be loaded" in missing.reason
    monkeypatch.setenv("GPUTOP_GPU_CHECK_NO_DRIVER", "1")
    assert driver.detect().reason == "no NVIDIA driver: GPUTOP_GPU_CHECK_NO_DRIVER is set"
