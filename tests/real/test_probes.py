"""The driver probe (libcuda through ctypes, in a child) and the torch probe (a subprocess)."""

from __future__ import annotations

import shutil
import stat
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.fake_libcuda import build_fake_libcuda
from helpers.visibility_machines import gpu

from gputop.core.probes import DriverProbe, compare_with_rules, probe_torch, run_driver_probe
from gputop.core.probes.driver import DriverProbeResult, format_uuid
from gputop.core.visibility import resolve_visibility

UUIDS = [format_uuid(f"{0x11 * (i + 1):02x}" * 16) for i in range(4)]


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_fake_libcuda(tmp_path_factory.mktemp("libcuda"))


@pytest.fixture(autouse=True)
def default_fake_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FAKE_CUDA_DEVICES", "FAKE_CUDA_FAIL", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


def machine():  # type: ignore[no-untyped-def]
    return tuple(gpu(i, uuid) for i, uuid in enumerate(UUIDS))


def test_uuid_bytes_are_formatted_like_nvidia_smi() -> None:
    assert format_uuid("00112233445566778899aabbccddeeff") == (
        "GPU-00112233-4455-6677-8899-aabbccddeeff"
    )


def test_the_probe_reads_each_ordinals_uuid_under_the_given_variables(fake_libcuda: str) -> None:
    result = run_driver_probe("2,0", None, library=fake_libcuda)
    assert result.status == "ok"
    assert result.uuids == (UUIDS[2], UUIDS[0])


def test_no_visible_device_is_a_status_not_an_error(fake_libcuda: str) -> None:
    assert run_driver_probe("", None, library=fake_libcuda).status == "no-device"


def test_a_machine_without_libcuda_says_so() -> None:
    result = run_driver_probe(None, None, library="/nonexistent/libcuda.so.1")
    assert result.status == "no-libcuda"


def test_agreement_with_the_rules_is_verified(fake_libcuda: str) -> None:
    visibility = resolve_visibility(machine(), "550.54.15", "2,0", "PCI_BUS_ID")
    verdict, message = compare_with_rules(
        visibility, run_driver_probe("2,0", None, library=fake_libcuda)
    )
    assert verdict == "verified" and "2 device" in message


def test_a_disagreement_is_shown_as_such() -> None:
    visibility = resolve_visibility(machine(), "550.54.15", "0", "PCI_BUS_ID")
    verdict, message = compare_with_rules(visibility, DriverProbeResult("ok", (UUIDS[3],)))
    assert verdict == "disagrees"
    assert UUIDS[3][:12] in message and UUIDS[0][:12] in message


def test_probes_are_cached_per_value_and_order(fake_libcuda: str) -> None:
    probe = DriverProbe(library=fake_libcuda)
    first = probe.probe("1", None)
    assert probe.probe("1", None) is first
    assert probe.probe("1", "PCI_BUS_ID") is not first


def fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "python3"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_an_interpreter_without_torch_says_no_torch(tmp_path: Path) -> None:
    """This Python with no site-packages (``-S``): torch cannot be imported, whether or not
    it is installed here."""
    python = tmp_path / "python3"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    python.chmod(0o755)
    result = probe_torch(str(python), None, None)
    assert result.status == "no-torch", result.message
    assert "no torch" in result.message


def test_a_missing_interpreter_says_so() -> None:
    result = probe_torch("/nonexistent/python3", None, None)
    assert result.status == "no-python"
    assert "/nonexistent/python3" in result.message


def test_a_crashing_interpreter_reports_its_last_words(tmp_path: Path) -> None:
    python = fake_python(
        tmp_path, "import sys\nsys.stderr.write('Segmentation fault\\n')\nsys.exit(139)\n"
    )
    result = probe_torch(python, None, None)
    assert result.status == "crashed"
    assert "Segmentation fault" in result.message and "139" in result.message


def test_a_cuda_torch_lists_its_devices_with_the_given_variables(tmp_path: Path) -> None:
    python = fake_python(
        tmp_path,
        """
        import json, os
        seen = os.environ.get("CUDA_VISIBLE_DEVICES")
        print(json.dumps({"status": "ok", "version": "2.13.0+cu128", "cuda": "12.8",
            "compiled": True, "device_count": 1,
            "devices": [{"name": "NVIDIA H100", "uuid": "GPU-" + seen}]}))
        """,
    )
    result = probe_torch(python, "abcdef12", None)
    assert result.status == "ok"
    assert result.device_count == 1
    assert result.devices[0]["uuid"] == "GPU-abcdef12"
    assert "2.13.0+cu128" in result.message


def test_a_cpu_only_torch_is_reported_as_such(tmp_path: Path) -> None:
    python = fake_python(
        tmp_path,
        """
        import json
        print(json.dumps({"status": "ok", "version": "2.13.0+cpu", "cuda": None,
            "compiled": False, "device_count": 0, "devices": []}))
        """,
    )
    result = probe_torch(python, None, None)
    assert result.status == "cpu-only" and "CPU-only" in result.message


def test_the_real_torch_probe_script_runs_in_an_interpreter_with_torch() -> None:
    """Runs the probe's own script (torch imported once, by the probe); skipped where no
    interpreter on PATH has torch."""
    for candidate in (sys.executable, shutil.which("python3")):
        if candidate is None:
            continue
        result = probe_torch(candidate, None, None)
        if result.status != "no-torch":
            assert result.status in ("ok", "cpu-only"), result.message
            assert result.version is not None
            return
    pytest.skip("no interpreter with torch here")
