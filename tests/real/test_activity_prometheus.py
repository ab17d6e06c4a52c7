"""``gputop report --prometheus``'s activity figures, from a real Prometheus scraping gputop's
exporter over a simulated Hopper machine of known activity, against the local report's.

Card 0 (an H100: SM 64.5 % active, tensor 41 %) holds alice's training and a real process of
gputop job 17; card 1 (an H100: 20 %, 10.5 %) alice's evaluation and bob's notebook; card 2
(an A100: no GPM) carol's. The same scenario is recorded into a local store; the figures of
``report --prometheus`` by GPU, user and job must be the local report's (within one sample:
the figures are constant, so equal), and null where a card has no GPM, as locally.
docs/activity.md ("Where it shows": History) and docs/exporter.md.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.history import GIB_MIB, process, read_only, record_stepped
from helpers.prometheus import Prometheus, running_exporter, running_prometheus
from helpers.scenarios import minimal_gpu
from helpers.waiting import wait_for

from gputop.cli.main import main
from gputop.core.history.jobs import job_of_process
from gputop.core.history.prometheus_report import prometheus_report
from gputop.core.history.report import ReportBy, ReportQuery, ReportRow, build_report
from gputop.core.sampling.pid_namespace import detect_pid_namespace

HOST = "hopper-1"
H100 = {"name": "NVIDIA H100 80GB HBM3", "cuda_compute_capability": [9, 0]}
CARD_ACTIVITY = {0: (64.5, 41.0), 1: (20.0, 10.5)}
"""SM active and tensor active, percent, of each Hopper card; card 2 has no GPM."""
WINDOW_S = 6
SAMPLES = 60
"""Local samples, 5 s apart: five recorded minutes."""


def write_scenario(directory: Path, job_pid: int) -> str:
    def activity(card: int) -> dict[str, float]:
        sm, tensor = CARD_ACTIVITY[card]
        return {"graphics": 95, "sm_active": sm, "tensor_active": tensor, "dram_active": 30}

    gpus = [
        minimal_gpu(**H100, uuid="GPU-44444444-aaaa-bbbb-cccc-000000000000",
                    pci_bus_id="00000000:07:00.0", activity=activity(0),
                    processes=[process(4400101, "alice", 20 * GIB_MIB, 90, "python", "train.py"),
                               {"pid": job_pid, "type": "C", "used_memory_mib": 300,
                                "sm_util": 0}]),
        minimal_gpu(**H100, uuid="GPU-44444444-aaaa-bbbb-cccc-000000000001",
                    pci_bus_id="00000000:08:00.0", activity=activity(1),
                    processes=[process(4400102, "alice", 4 * GIB_MIB, 60, "python", "eval.py"),
                               process(4400103, "bob", 10 * GIB_MIB, 0, "jupyter-lab")]),
        minimal_gpu(uuid="GPU-44444444-aaaa-bbbb-cccc-000000000002",
                    pci_bus_id="00000000:09:00.0",
                    processes=[process(4400104, "carol", 2 * GIB_MIB, 30, "python", "c.py")]),
    ]  # fmt: skip
    path = directory / "hopper-activity.json"
    document = {"driver_version": "550.127.05", "hostname": HOST, "gpus": gpus}
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def job_process() -> Iterator[subprocess.Popen[bytes]]:
    """A real process of gputop job 17, put on card 0 as an NVML pid."""
    if detect_pid_namespace().nested:
        pytest.skip("runs in a nested PID namespace: the job process is foreign there")
    child = subprocess.Popen(["sleep", "600"], env={**os.environ, "GPUTOP_JOB_ID": "17"})
    yield child
    child.kill()
    child.wait()


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory, job_process: subprocess.Popen[bytes]) -> str:
    return write_scenario(tmp_path_factory.mktemp("scenario"), job_process.pid)


@pytest.fixture(scope="module")
def prometheus(scenario: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    args = ("--fake", scenario, "--listen", "127.0.0.1:0", "--interval", "1")
    with running_exporter(*args) as exporter:
        target = exporter.url.removeprefix("http://").removesuffix("/metrics")
        with running_prometheus(tmp_path_factory.mktemp("prometheus"), target) as server:
            wait_for(
                lambda: server.query("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
                "Prometheus to scrape the exporter's activity",
                timeout_s=60,
            )
            yield server


@pytest.fixture(scope="module")
def local_store(scenario: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("local") / "history.db"
    record_stepped(scenario, store, SAMPLES, job_of=job_of_process)
    return store


def _window(prometheus: Prometheus) -> tuple[float, float]:
    """A window of WINDOW_S seconds in which Prometheus has every card's activity."""

    def covered() -> float | None:
        now = time.time()
        found = prometheus.query_range('DCGM_FI_PROF_SM_ACTIVE{gpu="1"}', now - WINDOW_S, now, 1.0)
        return now if found and len(found[0]["values"]) > WINDOW_S else None

    now = float(wait_for(covered, f"{WINDOW_S} s of activity in Prometheus", timeout_s=60))
    return now - WINDOW_S, now


def _remote(prometheus: Prometheus, by: ReportBy) -> dict[Any, ReportRow]:
    since, until = _window(prometheus)
    rows = prometheus_report(prometheus.url, ReportQuery(since, until, by), step_s=1.0)
    return {row.key: row for row in rows}


def _local(store: Path, by: ReportBy) -> dict[Any, ReportRow]:
    connection = read_only(store)
    try:
        rows = build_report(connection, ReportQuery(0.0, 4e9, by))
    finally:
        connection.close()
    return {row.key: row for row in rows}


def _figures(row: ReportRow) -> tuple[float | None, float | None]:
    return row.mean_sm_active_percent, row.mean_tensor_active_percent


def _same(remote: ReportRow, local: ReportRow) -> None:
    """Prometheus's figures are the local report's, null where the local one is."""
    for far, near in zip(_figures(remote), _figures(local), strict=True):
        if near is None:
            assert far is None
        else:
            assert far == pytest.approx(near, abs=1e-6)


def test_by_gpu_each_hopper_cards_activity_and_null_without_gpm(
    prometheus: Prometheus, local_store: Path
) -> None:
    remote, local = _remote(prometheus, ReportBy.GPU), _local(local_store, ReportBy.GPU)
    assert set(remote) == {f"{HOST}:0", f"{HOST}:1", f"{HOST}:2"}
    for card in (0, 1, 2):
        _same(remote[f"{HOST}:{card}"], local[card])
    assert _figures(remote[f"{HOST}:0"]) == pytest.approx(CARD_ACTIVITY[0])
    assert _figures(remote[f"{HOST}:1"]) == pytest.approx(CARD_ACTIVITY[1])
    assert _figures(remote[f"{HOST}:2"]) == (None, None)  # the A100: unknown, never 0


def test_by_user_the_cards_each_held_weighted_by_time(
    prometheus: Prometheus, local_store: Path
) -> None:
    remote, local = _remote(prometheus, ReportBy.USER), _local(local_store, ReportBy.USER)
    me = pwd.getpwuid(os.getuid()).pw_name
    assert {"alice", "bob", "carol", me} <= set(remote)
    for user in ("alice", "bob", "carol", me):
        _same(remote[user], local[user])
    both = [sum(pair) / 2 for pair in zip(*CARD_ACTIVITY.values(), strict=True)]
    assert _figures(remote["alice"]) == pytest.approx(both)  # cards 0 and 1, equally long
    assert _figures(remote["bob"]) == pytest.approx(CARD_ACTIVITY[1])
    assert _figures(remote["carol"]) == (None, None)


def test_by_job_the_cards_the_job_held(prometheus: Prometheus, local_store: Path) -> None:
    remote, local = _remote(prometheus, ReportBy.JOB), _local(local_store, ReportBy.JOB)
    (job,) = remote.values()
    assert job.key == f"{HOST}:gputop:17"
    _same(job, local["gputop:17"])
    assert _figures(job) == pytest.approx(CARD_ACTIVITY[0])


def test_gputop_report_prometheus_json_has_the_figures(
    prometheus: Prometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    _window(prometheus)
    args = ["report", "--prometheus", prometheus.url, "--since", "1m", "--by", "gpu", "--json"]
    assert main(args) == 0
    rows = {row["key"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert rows[f"{HOST}:0"]["mean_sm_active_percent"] == pytest.approx(64.5)
    assert rows[f"{HOST}:0"]["mean_tensor_active_percent"] == pytest.approx(41.0)
    assert rows[f"{HOST}:2"]["mean_sm_active_percent"] is None
