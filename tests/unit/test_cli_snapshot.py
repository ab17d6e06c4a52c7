"""`gputop snapshot` and the errors every command shares, as a user sees them."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pynvml
import pytest

import gputop.core
from gputop.cli.main import main

WriteScenario = Callable[..., str]


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "30")
    monkeypatch.delenv("GPUTOP_FAKE", raising=False)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_snapshot_of_v100x4_shows_four_v100s_and_both_processes_under_gpu_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_cli(capsys, "snapshot", "--fake", "v100x4")
    lines = out.splitlines()
    gpu_lines = [i for i, line in enumerate(lines) if line.startswith("[")]
    assert code == 0
    assert len(gpu_lines) == 4
    assert all("Tesla V100-SXM2-16GB" in lines[i] for i in gpu_lines)
    assert "8124 / 16130 MiB" in lines[gpu_lines[0]] and "55 / 300 W" in lines[gpu_lines[0]]
    under_gpu0 = "\n".join(lines[gpu_lines[0] : gpu_lines[1]])
    assert "4202277" in under_gpu0 and "python train.py" in under_gpu0
    assert "4327232" in under_gpu0 and "python eval.py" in under_gpu0


def test_fake_before_the_command_works_too(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--fake", "v100x4", "snapshot")
    assert code == 0 and "Tesla V100-SXM2-16GB" in out


def test_gputop_fake_environment_variable_selects_the_scenario(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE", "v100x4")
    code, out, _ = run_cli(capsys, "snapshot")
    gpu_lines = [line for line in out.splitlines() if line.startswith("[")]
    assert code == 0 and len(gpu_lines) == 4


def test_snapshot_json_follows_schema_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "snapshot", "--json", "--fake", "v100x4")
    document = json.loads(out)
    assert code == 0
    assert document["schema"] == 1
    for key in ("host", "driver_version", "cuda_driver_version", "timestamp", "gpus"):
        assert key in document
    gpu = document["gpus"][0]
    for key in (
        "index",
        "uuid",
        "name",
        "pci_bus_id",
        "memory_total_bytes",
        "memory_used_bytes",
        "utilization_gpu",
        "utilization_memory",
        "temperature_c",
        "fan_percent",
        "power_w",
        "power_limit_w",
        "clocks_mhz",
        "compute_capability",
        "mig_mode",
        "mig_devices",
        "lost",
        "processes",
    ):
        assert key in gpu, key
    assert gpu["fan_percent"] is None
    assert gpu["memory_used_bytes"] == 8124 * 1024 * 1024
    process = gpu["processes"][0]
    for key in (
        "pid",
        "type",
        "used_memory_bytes",
        "user",
        "command",
        "cpu_percent",
        "host_memory_bytes",
    ):
        assert key in process, key


def test_json_marks_a_refused_process_list_as_null(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, "snapshot", "--json", "--fake", "faulty")
    gpus = json.loads(out)["gpus"]
    assert any(gpu["processes"] is None for gpu in gpus)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "No NVIDIA driver found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "kernel driver is not loaded"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "different versions"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "refused access"),
        (pynvml.NVML_ERROR_UNKNOWN, "NVML failed to start"),
    ],
)
def test_a_driver_that_will_not_start_gets_one_paragraph_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, code: int, expected: str
) -> None:
    def refuse() -> None:
        raise pynvml.NVMLError(code)

    monkeypatch.setattr(pynvml, "nvmlInit", refuse)
    exit_code, out, err = run_cli(capsys, "snapshot")
    assert exit_code == 2
    assert expected in err
    assert "--fake demo" in err
    assert "Traceback" not in err and out == ""


def test_an_unknown_scenario_name_lists_the_builtin_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_cli(capsys, "snapshot", "--fake", "no-such-scenario")
    assert code == 2
    assert "no-such-scenario" in err and "v100x4" in err


def test_a_bad_scenario_names_the_file_and_field(
    capsys: pytest.CaptureFixture[str], scenario_file: WriteScenario
) -> None:
    path = scenario_file([{"name": "NVIDIA A100-SXM4-40GB", "memory_total_mib": 1}])
    code, _, err = run_cli(capsys, "snapshot", "--fake", path)
    assert code == 2
    assert path in err and "gpus[0]" in err and "uuid" in err


def test_a_bad_frozen_time_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "soon")
    code, _, err = run_cli(capsys, "snapshot", "--fake", "demo")
    assert code == 2 and "GPUTOP_FAKE_TIME" in err


def test_version_and_help_list_the_subcommands() -> None:
    version = subprocess.run(
        [sys.executable, "-m", "gputop", "--version"], capture_output=True, text=True
    )
    helptext = subprocess.run(
        [sys.executable, "-m", "gputop", "--help"], capture_output=True, text=True
    )
    assert version.returncode == 0 and version.stdout.startswith("gputop-dash ")
    assert helptext.returncode == 0 and "snapshot" in helptext.stdout


UI_AND_TORCH = ("textual", "rich", "torch")
"""What no module of the core may bring in at run time (docs/architecture.md)."""
EVERY_CORE_MODULE = (
    "import importlib, json, pkgutil, sys\n"
    "import gputop.core\n"
    "names = sorted(m.name for m in pkgutil.walk_packages(gputop.core.__path__, 'gputop.core.'))\n"
    "for name in names:\n"
    "    importlib.import_module(name)\n"
    "loaded = [m for m in sys.modules if m.split('.')[0] in sys.argv[1:]]\n"
    "print(json.dumps({'imported': names, 'loaded': sorted(loaded)}))\n"
)


def _import_in_a_fresh_interpreter(script: str, *args: str) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_importing_every_core_module_imports_neither_textual_nor_rich_nor_torch() -> None:
    """Every package and module under gputop/core, not a chosen few: the import-linter
    contract reads the source; this proves what a headless process really loads."""
    result = _import_in_a_fresh_interpreter(EVERY_CORE_MODULE, *UI_AND_TORCH)
    core_files = list((Path(gputop.core.__file__).parent).rglob("*.py"))
    assert len(result["imported"]) >= len(core_files) - 1  # every file but the core's __init__
    assert result["loaded"] == [], f"the core imported {result['loaded']}"


def test_the_run_time_import_check_sees_what_a_module_imports() -> None:
    """The check above can fail: importing Rich, as gputop.tui.safe does, is seen."""
    script = EVERY_CORE_MODULE.replace(
        "for name in names:", "import gputop.tui.safe\nfor name in []:"
    )
    loaded = _import_in_a_fresh_interpreter(script, *UI_AND_TORCH)["loaded"]
    assert "rich" in loaded and "textual" in loaded


def test_watch_reprints_in_place_until_ctrl_c() -> None:
    import signal

    env = {**os.environ, "GPUTOP_FAKE_TIME": "30"}
    child = subprocess.Popen(
        [sys.executable, "-m", "gputop", "snapshot", "--fake", "v100x4", "--watch", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    head = _read_until(child, lambda out: out.count("\x1b[H\x1b[J") >= 2)
    child.send_signal(signal.SIGINT)
    rest, err = child.communicate(timeout=10)
    out = head + rest
    assert child.returncode == 130  # Ctrl-C's status, as every command's (issue 40)
    assert out.count("\x1b[H\x1b[J") >= 2
    assert "Traceback" not in err


def test_watch_json_writes_one_document_per_line() -> None:
    import signal

    env = {**os.environ, "GPUTOP_FAKE_TIME": "30"}
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputop",
            "snapshot",
            "--fake",
            "v100x4",
            "--json",
            "--watch",
            "0.2",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    head = _read_until(child, lambda out: out.count("\n") >= 2)
    child.send_signal(signal.SIGINT)
    rest, _ = child.communicate(timeout=10)
    out = head + rest
    documents = [json.loads(line) for line in out.splitlines()]
    assert len(documents) >= 2
    assert all(document["schema"] == 1 for document in documents)


def test_too_short_a_watch_interval_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["snapshot", "--fake", "v100x4", "--watch", "0.01"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "give a number of seconds from 0.1 to 86400" in err


def test_a_gpu_nvml_refuses_is_shown_as_no_access(
    capsys: pytest.CaptureFixture[str], scenario_file: Callable[..., str]
) -> None:
    from helpers.scenarios import minimal_gpu

    path = scenario_file([minimal_gpu(no_permission=["nvmlDeviceGetHandleByIndex"])])
    code, out, _ = run_cli(capsys, "snapshot", "--fake", path)
    assert code == 0
    assert "[0]" in out and "NO ACCESS: NVML refused this GPU" in out
    assert "LOST" not in out


def _read_until(
    child: subprocess.Popen[str], enough: Callable[[str], bool], timeout_s: float = 30.0
) -> str:
    """What ``child`` wrote until ``enough(text)`` holds: a condition, never a fixed wait."""
    assert child.stdout is not None
    fd = child.stdout.fileno()
    data = b""
    deadline = time.monotonic() + timeout_s
    while not enough(data.decode("utf-8", "replace")):
        left = deadline - time.monotonic()
        assert left > 0, f"no such output after {timeout_s} s: {data[-200:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"the command ended early: {data[-200:]!r}"
            data += chunk
    return data.decode("utf-8", "replace")
