"""The fixtures every kind of test shares (docs/testing.md): backends on simulated GPUs with a
frozen clock, scenario files, a private job store, a claims directory, real processes with
CUDA variables, the C NVML. Each kind's own fixtures are in its folder's conftest.py; the
code behind them is in tests/helpers."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import claims, jobs
from helpers.cuda_view import start_processes

from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.pid_namespace import detect_pid_namespace
from gputop.core.sampling.source import open_backend

FROZEN_AT_S = 30.0

# The C NVML's fixtures (c_nvml, sleepers): tests/cnvml/fixtures.py, docs/c-nvml.md.
pytest_plugins = ["cnvml.fixtures"]

# Screens print local times: pin the zone so snapshots match on every machine.
os.environ["TZ"] = "UTC"
time.tzset()


# The files that take one worker longest (CI, 2026-12-02: each has a test of 9 s or more),
# longest first. ``make test`` hands files to the workers in collection order
# (``--no-loadscope-reorder``): these go first, so that none is left running alone at the
# end, then the rest, most tests first (the order xdist would choose by itself).
# docs/testing.md "How it is split".
LONG_FILES = (
    "tests/real/test_fleet_prometheus.py",
    "tests/multiuser/test_claims_hostile.py",
    "tests/multiuser/test_claims_bounded.py",
    "tests/tui/test_palette.py",
    "tests/real/test_lab_dashboard_sshd.py",
    "tests/tui/test_screen_diff_pty.py",
    "tests/unit/test_activity_history.py",
    "tests/real/test_gpu_rehearsal.py",
    "tests/real/test_gpu_kit.py",
    "tests/tui/test_store_stress.py",
    "tests/real/test_probes.py",
    "tests/unit/test_prometheus_client.py",
    "tests/tui/test_lab_hostile_host.py",
    "tests/tui/test_host_stats.py",
    "tests/unit/test_jobs_store.py",
    "tests/unit/test_visibility_inverse.py",
    "tests/real/test_hosts_install.py",
    "tests/real/test_lab_sshd.py",
    "tests/unit/test_declared_dependencies.py",
    "tests/real/test_launchers_torchrun.py",
    "tests/multiuser/test_claims.py",
    "tests/real/test_gpu_probe.py",
    "tests/tui/test_dashboard_keys_first_hour.py",
    "tests/tui/test_fleet_dashboard.py",
    "tests/tui/test_hostile_text.py",
    "tests/real/test_visibility_vs_torch.py",
    "tests/tui/test_process_table_churn.py",
    "tests/tui/test_attack_health_screen.py",
    "tests/tui/test_history_dashboard.py",
    "tests/multiuser/test_history_wal_bound.py",
    "tests/real/test_lab_history_sshd.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long files first, then the others by their number of tests, most first; each
    file's tests stay together and in their order."""
    rank = {name: place for place, name in enumerate(LONG_FILES)}
    counts: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        counts[path] = counts.get(path, 0) + 1
    first = {}
    for place, item in enumerate(items):
        first.setdefault(item.nodeid.split("::", 1)[0], place)

    def order(item: pytest.Item) -> tuple[int, int, int]:
        path = item.nodeid.split("::", 1)[0]
        return (rank.get(path, len(rank)), -counts[path], first[path])

    items.sort(key=order)


@pytest.fixture(autouse=True, scope="session")
def no_machine_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The same for what a module's or the session's fixtures make, before any test's own
    (``private_state_dir``) is set: a module's history store recorded the machine's real
    claims (another user's claim on this machine made ``report`` print them too)."""
    state_dir = tmp_path_factory.mktemp("session-state") / "gputop"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUTOP_STATE_DIR", str(state_dir))
        patch.setenv("GPUTOP_CLAIMS_DIR", str(state_dir.parent / "no-claims"))
        yield


@pytest.fixture(autouse=True)
def private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets its own job store: none may read or write the user's real one."""
    state_dir = tmp_path_factory.mktemp("state") / "gputop"
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(state_dir))
    # nor the machine's claims (docs/claims.md): a directory that does not exist
    monkeypatch.setenv("GPUTOP_CLAIMS_DIR", str(state_dir.parent / "no-claims"))
    return state_dir


@pytest.fixture
def host_pid_namespace() -> None:
    """For tests that put one of their own processes on a simulated GPU as an NVML pid."""
    if detect_pid_namespace().nested:
        pytest.skip(
            "runs in a nested PID namespace, where gputop takes a local pid for NVML's only "
            "if it holds /dev/nvidia* open (gputop.core.sampling.pid_namespace); this test's cannot"
        )


@pytest.fixture
def fake_backend() -> Callable[..., NvmlBackend]:
    """Open a built-in scenario or scenario file with the clock frozen (default t=30 s)."""
    opened: list[NvmlBackend] = []

    def open_fake(name: str, at_s: float = FROZEN_AT_S) -> NvmlBackend:
        backend = open_backend(name, environ={"GPUTOP_FAKE_TIME": str(at_s)})
        opened.append(backend)
        return backend

    yield open_fake
    for backend in opened:
        backend.close()


@pytest.fixture
def scenario_file(tmp_path: Path) -> Callable[..., str]:
    """Write a scenario from GPU dicts (and top-level overrides); return its path."""

    def write(gpus: list[dict[str, Any]], **top: Any) -> str:
        document = {
            "description": "test machine",
            "driver_version": "550.127.05",
            "cuda_driver_version": 12040,
            "gpus": gpus,
        }
        document.update(top)
        path = tmp_path / "scenario.json"
        path.write_text(json.dumps(document))
        return str(path)

    return write


@pytest.fixture
def start_process() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """A real process with the given variables added to a clean environment (helpers.cuda_view)."""
    yield from start_processes()


@pytest.fixture(name="state_dir")
def state_dir_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private job store for the test, simulated GPUs frozen at t=30 s, fast wait polls;
    afterwards every job recorded in it is killed with its whole process group."""
    yield from jobs.job_state_dir(tmp_path, monkeypatch)


@pytest.fixture(name="claims_dir")
def claims_dir_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A claims directory as ``gputop claims --setup`` makes it; GPUTOP_CLAIMS_DIR names it."""
    yield from claims.claims_dir(monkeypatch)
