"""``gputop exporter`` scraped by a real Prometheus server, on a scenario with hostile names.

One exporter (``--top 2``) and one Prometheus (scraping it every second) serve the whole
module; the tests read what Prometheus stored through its HTTP API, and compare it with
what the same scenario's snapshot says. See docs/exporter.md.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from helpers.hostile import HOSTILE
from helpers.prometheus import (
    Prometheus,
    promtool_problems,
    running_exporter,
    running_prometheus,
    wait_for,
)
from helpers.scenarios import minimal_gpu

from gputop.cli.main import main
from gputop.core.exporter.families import DCGM_GAUGES
from gputop.core.history.prometheus_report import prometheus_report
from gputop.core.history.report import ReportBy, ReportQuery
from gputop.core.model import Snapshot
from gputop.core.redact import REDACTED
from gputop.core.safe_text import clean
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.sampling.pid_namespace import detect_pid_namespace

MIB = 1 << 20
UUID_0 = "GPU-11111111-aaaa-bbbb-cccc-000000000000"
UUID_1 = "GPU-22222222-aaaa-bbbb-cccc-000000000000"
HOSTILE_USER = f"bob{HOSTILE}"
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e]")


def _process(pid: int, user: str, cmd: list[str], mib: int, sm: int) -> dict[str, Any]:
    return {
        "pid": pid,
        "used_memory_mib": mib,
        "type": "C",
        "user": user,
        "cmd": cmd,
        "sm_util": sm,
    }


PROCESSES = [
    _process(4400001, "alice", ["python", "train.py"], 8000, 80),
    _process(4400002, HOSTILE_USER, ["py", HOSTILE, '"quoted" \\back\\slash'], 4000, 0),
    _process(4400003, "alice", ["python", "eval.py"], 1000, 10),
    _process(4400004, "carol", ["jupyter"], 500, 0),
]


def write_scenario(directory: Path, job_pid: int) -> str:
    """GPU 0: four processes with hostile names; GPU 1: one real process of gputop job 17 with a
    forged SLURM_JOB_ID=4242 (``job_pid``), holding memory idle."""
    job_process = {"pid": job_pid, "used_memory_mib": 300, "type": "C", "sm_util": 0}
    path = directory / "hostile.json"
    path.write_text(
        json.dumps(
            {
                "description": "two GPUs, hostile names",
                "driver_version": "550.127.05",
                "cuda_driver_version": 12040,
                "hostname": f"host{HOSTILE}",
                "gpus": [
                    minimal_gpu(
                        name=f"NVIDIA {HOSTILE}",
                        processes=PROCESSES,
                        # what its processes hold and use, as a driver would say it
                        memory_used_mib=13500,
                        utilization_gpu=90,
                    ),
                    minimal_gpu(
                        uuid=UUID_1, pci_bus_id="00000000:08:00.0", processes=[job_process]
                    ),
                ],
            }
        ),
        encoding="utf-8",
    )
    return str(path)


@pytest.fixture(scope="module")
def job_process() -> Iterator[subprocess.Popen[bytes]]:
    """A real process of gputop job 17 that says it is in Slurm job 4242 (no Slurm says
    so, and anyone may set SLURM_JOB_ID), put on GPU 1 as an NVML pid."""
    env = {**os.environ, "GPUTOP_JOB_ID": "17", "SLURM_JOB_ID": "4242"}
    child = subprocess.Popen(["sleep", "600"], env=env)
    yield child
    child.kill()
    child.wait()


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory, job_process: subprocess.Popen[bytes]) -> str:
    return write_scenario(tmp_path_factory.mktemp("scenario"), job_process.pid)


@pytest.fixture
def local_pids() -> None:
    """The job process is seen as this machine's only outside a nested PID namespace."""
    if detect_pid_namespace().nested:
        pytest.skip("runs in a nested PID namespace: the job process is foreign there")


@pytest.fixture(scope="module")
def exposition_and_prometheus(
    scenario: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Prometheus]]:
    args = ("--fake", scenario, "--listen", "127.0.0.1:0", "--interval", "1", "--top", "2")
    with running_exporter(*args) as exporter:
        target = exporter.url.removeprefix("http://").removesuffix("/metrics")
        with running_prometheus(tmp_path_factory.mktemp("prometheus"), target) as prometheus:
            wait_for(
                lambda: (
                    prometheus.query('up{job="gputop"} == 1')
                    and prometheus.query("gputop_user_processes")
                ),
                "Prometheus to scrape the exporter",
                timeout_s=60,
            )
            yield exporter.scrape(), prometheus


@pytest.fixture
def prometheus(exposition_and_prometheus: tuple[str, Prometheus]) -> Prometheus:
    return exposition_and_prometheus[1]


@pytest.fixture
def snapshot(scenario: str, fake_backend: Callable[..., NvmlBackend]) -> Snapshot:
    return fake_backend(scenario).sample()


def _by_gpu(results: list[dict[str, Any]]) -> dict[str, float]:
    return {result["metric"]["gpu"]: float(result["value"][1]) for result in results}


def test_prometheus_stores_every_dcgm_reading_under_dcgm_exporters_name_and_unit(
    prometheus: Prometheus, snapshot: Snapshot
) -> None:
    for name, _, reading in DCGM_GAUGES:
        expected = {
            str(gpu.physical_index): float(value)
            for gpu in snapshot.gpus
            if (value := reading(gpu)) is not None
        }
        assert _by_gpu(prometheus.query(name)) == pytest.approx(expected), name
    assert _by_gpu(prometheus.query("DCGM_FI_DEV_FB_USED")) == {"0": 13500.0, "1": 1024.0}


def test_dcgm_series_carry_dcgm_exporters_labels_cleaned(prometheus: Prometheus) -> None:
    series = prometheus.query('DCGM_FI_DEV_GPU_TEMP{gpu="0"}')
    assert len(series) == 1
    labels = series[0]["metric"]
    assert labels["UUID"] == UUID_0
    assert labels["device"] == "nvidia0"
    assert labels["pci_bus_id"] == "00000000:07:00.0"
    assert labels["modelName"] == clean(f"NVIDIA {HOSTILE}")
    assert labels["Hostname"] == clean(f"host{HOSTILE}")


def test_each_gpu_exports_its_top_processes_and_sums_the_rest(prometheus: Prometheus) -> None:
    kept = prometheus.query('gputop_process_memory_used_bytes{gpu="0"}')
    assert sorted(result["metric"]["pid"] for result in kept) == ["4400001", "4400002"]
    assert _by_gpu(prometheus.query("gputop_gpu_other_processes")) == {"0": 2.0, "1": 0.0}
    (job,) = prometheus.query('gputop_process_memory_used_bytes{gpu="1"}')
    assert float(job["value"][1]) == 300.0 * MIB
    others = prometheus.query("gputop_gpu_other_processes_memory_used_bytes")
    assert _by_gpu(others) == {"0": 1500.0 * MIB, "1": 0.0}
    assert _by_gpu(prometheus.query("gputop_gpu_processes")) == {"0": 4.0, "1": 1.0}


def test_process_series_name_user_and_command_cleaned(prometheus: Prometheus) -> None:
    (hostile,) = prometheus.query('gputop_process_memory_used_bytes{pid="4400002"}')
    labels = hostile["metric"]
    assert labels["user"] == clean(HOSTILE_USER)
    # HOSTILE is no path, number or option: hidden word by word (redact.py); its newline
    # and carriage return, kept between the words, cleaned
    hidden = REDACTED
    assert labels["command"] == clean(
        f'py {hidden}\n{hidden} {hidden}\r{hidden} "{hidden}" {hidden}'
    )
    assert float(hostile["value"][1]) == 4000.0 * MIB
    assert not CONTROL.search("".join(labels.values()))


def test_users_totals_count_every_process_and_memory_held_idle(prometheus: Prometheus) -> None:
    def by_user(name: str) -> dict[str, float]:
        found = {r["metric"]["user"]: float(r["value"][1]) for r in prometheus.query(name)}
        return {user: value for user, value in found.items() if user in ("alice", bob, "carol")}

    bob = clean(HOSTILE_USER)
    assert by_user("gputop_user_memory_used_bytes") == {
        "alice": 9000.0 * MIB,
        bob: 4000.0 * MIB,
        "carol": 500.0 * MIB,
    }
    assert by_user("gputop_user_idle_held_memory_bytes") == {
        "alice": 0.0,
        bob: 4000.0 * MIB,
        "carol": 500.0 * MIB,
    }
    assert by_user("gputop_user_processes") == {"alice": 2.0, bob: 1.0, "carol": 1.0}
    assert _by_gpu(prometheus.query("gputop_gpu_idle_held_memory_bytes")) == {
        "0": 4500.0 * MIB,
        "1": 300.0 * MIB,
    }


def test_promtool_finds_nothing_wrong_with_the_hostile_exposition(
    exposition_and_prometheus: tuple[str, Prometheus],
) -> None:
    exposition = exposition_and_prometheus[0]
    assert "4400002" in exposition
    assert promtool_problems(exposition) == []
    assert not CONTROL.search(exposition.replace("\n", ""))


def _dashboard_queries() -> list[str]:
    path = REPO / "docs" / "grafana-gputop.json"
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return exprs


def test_every_query_of_the_grafana_dashboard_runs_on_metrics_the_exporter_gives(
    prometheus: Prometheus,
) -> None:
    queries = _dashboard_queries()
    assert len(queries) > 10
    names = {
        name for query in queries for name in re.findall(r"\b(?:DCGM_FI_DEV_\w+|gputop_\w+)", query)
    }
    missing = [name for name in sorted(names) if not prometheus.query(f"count({name})")]
    assert missing == []
    for query in queries:
        if query.startswith("label_values("):
            continue  # Grafana's, not PromQL: its metric is checked above
        prometheus.query(query.replace("$host", ".*"))  # PromQL Prometheus accepts
    (hosts,) = prometheus.query("count by (Hostname) (gputop_samples_total)")
    assert hosts["metric"]["Hostname"] == clean(f"host{HOSTILE}")


# -- gputop report --prometheus: the history report's rows from the same server -------------


def _enough_history(prometheus: Prometheus, seconds: int) -> float:
    """Wait until Prometheus holds ``seconds`` of samples; the time it does."""

    def covered() -> float | None:
        now = time.time()
        found = prometheus.query_range("gputop_samples_total", now - seconds, now, 1.0)
        return now if found and len(found[0]["values"]) >= seconds else None

    return float(wait_for(covered, f"{seconds} s of samples in Prometheus", timeout_s=60))


def test_report_by_user_from_prometheus_finds_the_idle_holder(prometheus: Prometheus) -> None:
    now = _enough_history(prometheus, 6)
    query = ReportQuery(now - 6, now, ReportBy.USER, idle_min_s=3.0)
    rows = prometheus_report(prometheus.url, query, step_s=1.0)
    by_user = {row.key: row for row in rows}
    bob, alice = by_user[clean(HOSTILE_USER)], by_user["alice"]
    assert rows[0] is bob  # idle holders first
    assert bob.idle_held_seconds == bob.gpu_seconds >= 5.0
    assert bob.mean_memory_bytes == 4000 * MIB and bob.mean_sm_util == 0.0
    assert alice.idle_held_seconds == 0.0
    assert alice.gpu_seconds == bob.gpu_seconds
    # alice's second process and carol's are past --top 2: only their sums are exported
    assert (alice.mean_memory_bytes, alice.peak_memory_bytes) == (8000 * MIB, 8000 * MIB)
    assert alice.mean_sm_util == 80.0
    assert "carol" not in by_user


def test_a_run_shorter_than_idle_min_is_not_held_idle(prometheus: Prometheus) -> None:
    now = _enough_history(prometheus, 4)
    query = ReportQuery(now - 4, now, ReportBy.USER, idle_min_s=3600.0)
    rows = prometheus_report(prometheus.url, query, step_s=1.0)
    assert rows and all(row.idle_held_seconds == 0.0 for row in rows)


@pytest.mark.usefixtures("local_pids")
@pytest.mark.parametrize("by", list(ReportBy))
def test_the_report_holds_each_holder_prometheus_has(
    prometheus: Prometheus, by: ReportBy, job_process: subprocess.Popen[bytes]
) -> None:
    now = _enough_history(prometheus, 3)
    rows = prometheus_report(prometheus.url, ReportQuery(now - 3, now, by), step_s=1.0)
    me = pwd.getpwuid(os.getuid()).pw_name
    host = clean(f"host{HOSTILE}")
    expected = {
        ReportBy.USER: {"alice", clean(HOSTILE_USER), me},
        ReportBy.GPU: {f"{host}:0", f"{host}:1"},
        ReportBy.JOB: {f"{host}:gputop:17"},  # its gputop job before its Slurm job, as the
        # store's; a job's key holds its host (and its row its user): ids are per host and user
        ReportBy.PROCESS: {4400001, 4400002, job_process.pid},
    }
    assert {row.key for row in rows} == expected[by]


@pytest.mark.usefixtures("local_pids")
def test_the_job_process_is_labelled_with_its_gputop_job_never_a_forged_slurm_job(
    prometheus: Prometheus, job_process: subprocess.Popen[bytes]
) -> None:
    (series,) = prometheus.query(f'gputop_process_memory_used_bytes{{pid="{job_process.pid}"}}')
    assert series["metric"]["gputop_job"] == "17"
    assert "slurm_job" not in series["metric"]  # empty: no Slurm says 4242 is this user's
    now = _enough_history(prometheus, 4)
    (job,) = prometheus_report(
        prometheus.url, ReportQuery(now - 4, now, ReportBy.JOB, idle_min_s=2.0), step_s=1.0
    )
    assert job.key == f"{clean(f'host{HOSTILE}')}:gputop:17"
    assert job.user == pwd.getpwuid(os.getuid()).pw_name
    assert job.mean_memory_bytes == 300 * MIB
    assert job.idle_held_seconds == job.gpu_seconds > 0


def test_gputop_report_prometheus_prints_the_reports_json(
    prometheus: Prometheus, capsys: pytest.CaptureFixture[str]
) -> None:
    _enough_history(prometheus, 3)
    args = ["report", "--prometheus", prometheus.url, "--since", "2m", "--by", "process"]
    assert main([*args, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["by"] == "process"
    rows = {row["key"]: row for row in document["rows"]}
    assert {4400001, 4400002} <= set(rows)
    assert rows[4400002]["user"] == clean(HOSTILE_USER)  # the exporter's label, cleaned
    assert rows[4400002]["mean_memory_bytes"] == 4000 * MIB
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "4400002" in table
    assert not CONTROL.search(table.replace("\n", ""))


def test_report_prometheus_says_what_is_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--prometheus", "ftp://x"]) == 2
    assert "give the server's http:// or https:// address" in capsys.readouterr().err
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert main(["report", "--prometheus", f"http://127.0.0.1:{port}"]) == 1
    error = capsys.readouterr().err
    assert f"Cannot reach Prometheus at http://127.0.0.1:{port}" in error
    assert "Traceback" not in error


def test_report_prometheus_refuses_a_bad_query_in_prometheuss_words(
    prometheus: Prometheus,
) -> None:
    from gputop.core.prometheus.client import PrometheusError, query_range

    with pytest.raises(PrometheusError, match="refused the query"):
        query_range(prometheus.url, "sum by (", time.time() - 10, time.time(), 1.0)


# -- NVIDIA's dashboard 12239 over a simulated Hopper server (docs/activity.md) -------------

DASHBOARD_12239 = (
    'max(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)',
    'avg(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"})',
    'max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)',
    'sum(max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (gpu))',
    'max(DCGM_FI_DEV_SM_CLOCK{Hostname=~"$Hostname", gpu=~"$gpu"} * 1000000)'
    " by (Hostname, UUID, gpu)",
    'max(DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname=~"$Hostname", gpu=~"$gpu"})'
    " by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)",
    'max(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{Hostname=~"$Hostname", gpu=~"$gpu"})'
    " by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)",
    'max(DCGM_FI_DEV_FB_USED{Hostname=~"$Hostname", gpu=~"$gpu"})'
    " by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)",
)
"""The eight panels' queries of NVIDIA's Grafana dashboard for dcgm-exporter (id 12239), as
it writes them; its two variables are ``label_values`` of DCGM_FI_DEV_FB_FREE by Hostname
and by gpu."""
H100_MIG_UUIDS = (
    "MIG-aaaaaaaa-5b6a-4789-8a9b-0c1d2e3f4a5b",
    "MIG-bbbbbbbb-5b6a-4789-8a9b-0c1d2e3f4a5b",
)


def write_hopper_scenario(directory: Path) -> str:
    """An H100, an H100 in MIG mode with two GPU instances, and an A100 (no GPM)."""
    h100 = {"name": "NVIDIA H100 80GB HBM3", "cuda_compute_capability": [9, 0]}
    gpus = [
        minimal_gpu(**h100, activity={"graphics": 93, "sm_active": 64.5, "tensor_active": 41,
                                      "dram_active": 55, "pcie_tx_mib_s": 2,
                                      "nvlink_rx_mib_s": 9000},
                    clock_event_reasons=[{"reasons": ["sw_power_cap"], "until_s": 1e6}]),
        minimal_gpu(**h100, uuid=UUID_1, pci_bus_id="00000000:08:00.0",
                    activity={"graphics": 50, "sm_active": 30}, mig_mode=[1, 1],
                    mig_devices=[
                        {"uuid": H100_MIG_UUIDS[0], "gpu_instance_id": 1,
                         "compute_instance_id": 0, "memory_total_mib": 40000,
                         "profile": "3g.40gb", "multiprocessor_count": 60,
                         "activity": {"graphics": 80, "tensor_active": 70}},
                        {"uuid": H100_MIG_UUIDS[1], "gpu_instance_id": 2,
                         "compute_instance_id": 0, "memory_total_mib": 20000,
                         "profile": "2g.20gb", "multiprocessor_count": 32,
                         "activity": {"graphics": 10, "tensor_active": 0}},
                    ]),
        minimal_gpu(uuid="GPU-33333333-aaaa-bbbb-cccc-000000000000",
                    pci_bus_id="00000000:09:00.0"),
    ]  # fmt: skip
    path = directory / "hopper.json"
    path.write_text(
        json.dumps({"driver_version": "550.127.05", "hostname": "hopper-1", "gpus": gpus}),
        encoding="utf-8",
    )
    return str(path)


@pytest.fixture(scope="module")
def hopper_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    scenario = write_hopper_scenario(tmp_path_factory.mktemp("hopper"))
    args = ("--fake", scenario, "--listen", "127.0.0.1:0", "--interval", "1")
    with running_exporter(*args) as exporter:
        target = exporter.url.removeprefix("http://").removesuffix("/metrics")
        with running_prometheus(tmp_path_factory.mktemp("prometheus"), target) as prometheus:
            wait_for(
                lambda: prometheus.query("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
                "Prometheus to scrape the Hopper exporter's activity",
                timeout_s=60,
            )
            yield prometheus


def _series(results: list[dict[str, Any]]) -> dict[tuple[str, str, str], float]:
    return {
        (r["metric"]["gpu"], r["metric"].get("GPU_I_ID", ""), r["metric"].get("GPU_I_PROFILE", "")):
        float(r["value"][1])
        for r in results
    }  # fmt: skip


def test_every_panel_of_dashboard_12239_answers_over_a_hopper_server(
    hopper_prometheus: Prometheus,
) -> None:
    for query in DASHBOARD_12239:
        answer = hopper_prometheus.query(query.replace("$Hostname", ".*").replace("$gpu", ".*"))
        assert answer, f"no data for the panel {query}"
    for variable in ("DCGM_FI_DEV_FB_FREE", 'DCGM_FI_DEV_FB_FREE{Hostname=~".*"}'):
        assert hopper_prometheus.query(variable)
    utilisation = _series(hopper_prometheus.query(DASHBOARD_12239[5].replace("$Hostname", ".*")
                                                  .replace("$gpu", ".*")))  # fmt: skip
    assert utilisation == {
        ("0", "", ""): 0.93,
        ("1", "", ""): 0.5,
        ("1", "1", "3g.40gb"): 0.8,
        ("1", "2", "2g.20gb"): 0.1,
    }


def test_activity_series_have_dcgm_exporters_names_and_units_and_none_where_gpm_is_absent(
    hopper_prometheus: Prometheus,
) -> None:
    def one(query: str) -> dict[tuple[str, str, str], float]:
        return _series(hopper_prometheus.query(query))

    assert one("DCGM_FI_PROF_SM_ACTIVE") == {("0", "", ""): 0.645, ("1", "", ""): 0.3}
    assert one("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE") == {
        ("0", "", ""): 0.41,
        ("1", "1", "3g.40gb"): 0.7,
        ("1", "2", "2g.20gb"): 0.0,
    }
    assert one("DCGM_FI_PROF_DRAM_ACTIVE") == {("0", "", ""): 0.55}
    assert one("DCGM_FI_PROF_PCIE_TX_BYTES") == {("0", "", ""): 2 * MIB}
    assert one("DCGM_FI_PROF_NVLINK_RX_BYTES") == {("0", "", ""): 9000 * MIB}
    assert one('{__name__=~"DCGM_FI_PROF_.*", gpu="2"}') == {}  # the A100: absent, not 0
    assert one("DCGM_FI_DEV_CLOCKS_EVENT_REASONS") == {
        ("0", "", ""): 4.0,
        ("1", "", ""): 0.0,
        ("2", "", ""): 0.0,
    }
