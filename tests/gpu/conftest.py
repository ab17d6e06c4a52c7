"""The real-GPU suite's fixtures and its report (docs/real-gpu.md).

Without an NVIDIA driver only ``test_gpu_driver.py`` is collected, and it skips at import
with the one reason ``driver.py`` gives: ``make test`` says so once and goes on. With
``GPUTOP_GPU_REPORT_DIR`` set (``make gpu-check``, the kit's ``run.sh``), the session ends
by writing ``gpu-check-report.md`` and ``gpu-check-report.json`` there, a driver or not.
"""

from __future__ import annotations

import json
import os
import platform
import pwd
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from gpu import compare
from gpu.driver import DRIVER

HERE = Path(__file__).resolve().parent
PROBE = HERE / "cuda_probe.py"
REPORT_DIR_ENV = "GPUTOP_GPU_REPORT_DIR"
REPORT_NAME = "gpu-check-report"

if not DRIVER.present:
    collect_ignore = sorted(
        path.name for path in HERE.glob("test_*.py") if path.name != "test_gpu_driver.py"
    )

_results: dict[str, compare.Result] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs an NVIDIA driver (docs/real-gpu.md)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every check here is marked ``gpu``: ``pytest -m 'not gpu'`` leaves them out anywhere."""
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.gpu)


@pytest.fixture
def result(request: pytest.FixtureRequest) -> compare.Result:
    """This check's entry in the report: add comparisons and numbers to it."""
    return _results.setdefault(request.node.nodeid, compare.Result(_check_name(request.node)))


def _check_name(item: pytest.Item) -> str:
    module = Path(str(item.fspath)).stem.removeprefix("test_gpu_")
    return f"{module}: {item.name.removeprefix('test_')}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    entry = _results.setdefault(item.nodeid, compare.Result(_check_name(item)))
    if report.when == "call" or (report.when == "setup" and not report.passed):
        entry.outcome = report.outcome
        if report.skipped and isinstance(report.longrepr, tuple):
            entry.note = str(report.longrepr[2]).removeprefix("Skipped: ")
        elif report.failed and not entry.failed:
            entry.note = (
                report.longreprtext.strip().splitlines()[-1][:300] if report.longreprtext else ""
            )
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    folder = os.environ.get(REPORT_DIR_ENV)
    if not folder or hasattr(session.config, "workerinput"):
        return
    try:
        machine = machine_facts()
    except Exception as error:  # the report is written whatever the machine is missing
        machine = {"facts": f"could not be read: {type(error).__name__}: {error}"}
    results = list(_results.values())
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    (target / f"{REPORT_NAME}.json").write_text(compare.report_json(machine, results))
    (target / f"{REPORT_NAME}.md").write_text(compare.report_markdown(machine, results))


def machine_facts() -> dict[str, Any]:
    """What the report names the run by: when, where, which driver, CUDA, binding, gputop."""
    facts: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "gputop": _output([sys.executable, "-m", "gputop", "--version"]),
        "nvidia-ml-py": _distribution_version("nvidia-ml-py"),
        "kit": os.environ.get("GPUTOP_GPU_KIT", "none: run from a checkout"),
    }
    if not DRIVER.present:
        facts["driver"] = DRIVER.reason
        facts["result"] = "nothing was checked: " + DRIVER.reason
        return facts
    from gpu.cuda_probe import cuda_driver_version

    version = cuda_driver_version()
    facts["driver"] = _output(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    ).splitlines()[0]
    facts["cuda"] = None if version is None else f"{version // 1000}.{version % 1000 // 10}"
    facts["gpus"] = _output(["nvidia-smi", "-L"]).splitlines()
    return facts


def _output(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unavailable ({error})"
    return done.stdout.strip() or done.stderr.strip()


def _distribution_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# --- what the checks share ------------------------------------------------------------------


def smi_query() -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        compare.query_gpu_command(), capture_output=True, text=True, timeout=60, check=True
    )
    return compare.parse_query_gpu(done.stdout)


def smi_apps() -> list[compare.ComputeApp]:
    done = subprocess.run(
        compare.compute_apps_command(), capture_output=True, text=True, timeout=60, check=True
    )
    return compare.parse_compute_apps(done.stdout)


def smi_list() -> list[dict[str, Any]]:
    done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True)
    return compare.parse_gpu_list(done.stdout)


def known_uuids(gpus: list[dict[str, Any]]) -> list[str]:
    return [gpu["uuid"] for gpu in gpus] + [mig["uuid"] for gpu in gpus for mig in gpu["migs"]]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment for gputop and the probe: a private state directory, no CUDA variables
    of the caller's (a check sets its own)."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
    }
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    environ["GPUTOP_STATE_DIR"] = str(state / "gputop")
    environ.pop("GPUTOP_FAKE", None)
    return environ


@pytest.fixture
def gputop(env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``gputop ARGS`` as a user runs it (this interpreter's), its output captured."""

    def run(*args: str, extra: dict[str, str | None] | None = None, timeout: float = 120):
        environ = dict(env)
        for key, value in (extra or {}).items():
            if value is None:
                environ.pop(key, None)
            else:
                environ[key] = value
        done = subprocess.run(
            [sys.executable, "-m", "gputop", *args],
            capture_output=True,
            text=True,
            env=environ,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, f"gputop {' '.join(args)}: {done.returncode}\n{done.stderr}"
        return done

    return run


def gputop_json(run: Callable[..., subprocess.CompletedProcess[str]], *args: str, **kw: Any) -> Any:
    return json.loads(run(*args, **kw).stdout)


def user_name() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def wait_for_file(
    path: Path, deadline_s: float, process: subprocess.Popen[Any] | None = None
) -> Any:
    """The JSON a probe writes once ready; fails with its output if it died first."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if path.exists():
            return json.loads(path.read_text())
        if process is not None and process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            pytest.fail(f"the probe exited {process.returncode} before it was ready: {output}")
        time.sleep(0.05)
    pytest.fail(f"the probe did not write {path} within {deadline_s:g} s")


@pytest.fixture
def probe(env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``cuda_probe.py MODE ARGS`` with the environment given; stopped at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(PROBE), *args],
            env={**env, **(extra or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=tmp_path,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def overhead_mib() -> float:
    """What the driver may add to a process's memory beyond what it allocated (its context)."""
    return float(os.environ.get("GPUTOP_GPU_OVERHEAD_MIB", "1024"))


def target_card(gpus: list[dict[str, Any]]) -> tuple[str, str]:
    """(the CUDA_VISIBLE_DEVICES entry, the GPU UUID a process on it is listed under): the
    first card without MIG, else the first MIG device."""
    for gpu in gpus:
        if not gpu["migs"]:
            return gpu["uuid"], gpu["uuid"]
    return gpus[0]["migs"][0]["uuid"], gpus[0]["uuid"]
