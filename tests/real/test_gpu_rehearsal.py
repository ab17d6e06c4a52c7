"""A rehearsal of the real-GPU suite on imitations: **not a result on a GPU**.

The C NVML (docs/c-nvml.md) stands for the driver's NVML, the C libcuda
(tests/helpers/fake_libcuda.py) for libcuda, and a small ``nvidia-smi`` written here answers
from the same C NVML through nvidia-ml-py. Both sides of every comparison then read one
imitation, so agreement proves nothing about gputop; what this proves is the suite itself:
that its checks collect, run, reach their comparisons, pass where the two sides agree and
write the report (docs/real-gpu.md). The suite's own CUDA process is put in the C NVML's
listing as it starts (the data file rewritten, as a driver would list it). Left out: the
job's usage (its supervisor reads the C NVML once, before the job's process exists) and the
dashboard's CPU (30 s of time); activity skips for want of GPM.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from cnvml.fixtures import CNvml
from helpers import REPO
from helpers.fake_libcuda import MEMORY_SOURCE, SOURCE, devices_spec
from helpers.scenarios import minimal_gpu

ROOT = REPO
MIB = 1 << 20

NVIDIA_SMI = r'''#!PYTHON
"""An imitation of nvidia-smi's queries the real-GPU suite makes, answered through
nvidia-ml-py from whichever libnvidia-ml.so.1 loads (here the C NVML)."""
import sys
import pynvml as n

args = sys.argv[1:]
n.nvmlInit()
handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
text = lambda v: v.decode() if isinstance(v, bytes) else v

def gpu_field(i, h, name):
    memory = n.nvmlDeviceGetMemoryInfo(h)
    return {
        "index": lambda: str(i),
        "uuid": lambda: text(n.nvmlDeviceGetUUID(h)),
        "name": lambda: text(n.nvmlDeviceGetName(h)),
        "pci.bus_id": lambda: text(n.nvmlDeviceGetPciInfo(h).busId),
        "memory.total": lambda: str(memory.total // 2**20),
        "memory.used": lambda: str(memory.used // 2**20),
        "temperature.gpu": lambda: str(n.nvmlDeviceGetTemperature(h, 0)),
        "power.draw": lambda: "%.2f" % (n.nvmlDeviceGetPowerUsage(h) / 1000),
        "power.limit": lambda: "%.2f" % (n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000),
        "utilization.gpu": lambda: str(n.nvmlDeviceGetUtilizationRates(h).gpu),
        "clocks.sm": lambda: str(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
        "pstate": lambda: "P%d" % n.nvmlDeviceGetPerformanceState(h),
        "driver_version": lambda: text(n.nvmlSystemGetDriverVersion()),
    }[name]()

if args == ["-L"]:
    for i, h in enumerate(handles):
        print("GPU %d: %s (UUID: %s)" % (i, gpu_field(i, h, "name"), gpu_field(i, h, "uuid")))
elif args[0].startswith("--query-gpu="):
    names = args[0].split("=", 1)[1].split(",")
    for i, h in enumerate(handles):
        print(", ".join(gpu_field(i, h, name) for name in names))
elif args[0].startswith("--query-compute-apps="):
    for i, h in enumerate(handles):
        for p in n.nvmlDeviceGetComputeRunningProcesses(h):
            print("%d, sleep, %d, %s" % (p.pid, p.usedGpuMemory // 2**20, gpu_field(i, h, "uuid")))
elif args == ["-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER"]:
    # nvidia-smi's -q text for these sections, as R550 prints it on Hopper; NVML gives totals
    # only, so each total is put on the DRAM line and the SRAM lines say 0
    def read(call, *more):
        try:
            return call(*more)
        except n.NVMLError:
            return None
    def shown(value):
        if value is None:
            return "N/A"
        if isinstance(value, bool):
            return "Yes" if value else "No"
        return str(value)
    def line(depth, name, value=None):
        key = "    " * depth + name
        print(key if value is None else "%-42s: %s" % (key, value))
    print("==============NVSMI LOG==============")
    line(0, "Attached GPUs", len(handles))
    for h in handles:
        print("GPU " + text(n.nvmlDeviceGetPciInfo(h).busId))
        line(1, "ECC Errors")
        ecc = n.nvmlDeviceGetTotalEccErrors
        for counter, name in ((n.NVML_VOLATILE_ECC, "Volatile"),
                              (n.NVML_AGGREGATE_ECC, "Aggregate")):
            corrected = read(ecc, h, n.NVML_MEMORY_ERROR_TYPE_CORRECTED, counter)
            uncorrected = read(ecc, h, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter)
            line(2, name)
            line(3, "SRAM Correctable", "N/A" if corrected is None else 0)
            line(3, "SRAM Uncorrectable Parity", "N/A" if uncorrected is None else 0)
            line(3, "SRAM Uncorrectable SEC-DED", "N/A" if uncorrected is None else 0)
            line(3, "DRAM Correctable", shown(corrected))
            line(3, "DRAM Uncorrectable", shown(uncorrected))
        line(1, "Retired Pages")
        pages = n.nvmlDeviceGetRetiredPages
        single = read(pages, h, n.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        double = read(pages, h, n.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        pending = read(n.nvmlDeviceGetRetiredPagesPendingStatus, h)
        line(2, "Single Bit ECC", shown(None if single is None else len(single)))
        line(2, "Double Bit ECC", shown(None if double is None else len(double)))
        line(2, "Pending Page Blacklist", shown(None if pending is None else bool(pending)))
        rows = read(n.nvmlDeviceGetRemappedRows, h)
        line(1, "Remapped Rows")
        line(2, "Correctable Error", shown(None if rows is None else rows[0]))
        line(2, "Uncorrectable Error", shown(None if rows is None else rows[1]))
        line(2, "Pending", shown(None if rows is None else bool(rows[2])))
        line(2, "Remapping Failure Occurred", shown(None if rows is None else bool(rows[3])))
else:
    sys.exit("this nvidia-smi imitation answers -L, --query-gpu, --query-compute-apps and "
             "-q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER only")
'''

GPUS = [
    ("GPU-1a1a1a1a-1111-4111-8111-111111111111", 132, "00000000:1A:00.0"),
    ("GPU-2b2b2b2b-2222-4222-8222-222222222222", 132, "00000000:2B:00.0"),
]


PROBE_OVERHEAD_MIB = 300
"""What the rehearsal's "driver" adds to what the suite's CUDA process holds (its context)."""


@dataclass
class Machine:
    env: dict[str, str]
    c_nvml: CNvml
    scenario: dict[str, Any]
    data: Path
    listed: tuple[int, ...] = ()

    def list_on_gpu0(self, pids: tuple[int, ...], held_mib: int) -> None:
        """Rewrite the C NVML's data so that these pids hold ``held_mib`` + the overhead on
        GPU 0 (each later nvmlInit reads it), as the driver lists a process that allocated."""
        scenario = json.loads(json.dumps(self.scenario))
        scenario["gpus"][0]["processes"] += [
            {"pid": pid, "used_memory_mib": held_mib + PROBE_OVERHEAD_MIB, "sm_util": 0}
            for pid in pids
        ]
        fresh = self.c_nvml.data_file(f"rehearsal-{len(pids)}-{pids[-1:]}", scenario, "R550")
        os.replace(fresh, self.data)
        self.listed = pids


@pytest.fixture(scope="module")
def machine(c_nvml: CNvml, tmp_path_factory: pytest.TempPathFactory) -> Machine:
    """A two-card Hopper server made of imitations."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (the dashboard check needs it)")
    folder = tmp_path_factory.mktemp("machine")
    sleeper = subprocess.Popen(["sleep", "600"])
    h100 = minimal_gpu(
        name="NVIDIA H100 80GB HBM3",
        memory_total_mib=81559,
        power_limit_w=700,
        cuda_compute_capability=[9, 0],
        multiprocessor_count=132,
    )
    scenario = {
        "description": "rehearsal",
        "driver_version": "550.127.05",
        "cuda_driver_version": 12040,
        "gpus": [
            {
                **h100,
                "uuid": uuid,
                "pci_bus_id": bus,
                "processes": [{"pid": sleeper.pid, "used_memory_mib": 1000, "sm_util": 10}]
                if index == 0
                else [],
            }
            for index, (uuid, _, bus) in enumerate(GPUS)
        ],
    }
    data = c_nvml.data_file("rehearsal", scenario, "R550")
    libcuda = folder / "libcuda"
    libcuda.mkdir()
    (libcuda / "libcuda.c").write_text(SOURCE + MEMORY_SOURCE)
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(libcuda / "libcuda.so.1"), str(libcuda / "libcuda.c")],
        check=True,
    )
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(NVIDIA_SMI.replace("PYTHON", sys.executable, 1))
    smi.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTOP_", "CUDA_"))}
    env.update(
        LD_LIBRARY_PATH=f"{c_nvml.library_dirs['R550']}:{libcuda}",
        GPUTOP_CNVML_DATA=str(data),
        FAKE_CUDA_DEVICES=devices_spec(*((u, s, b[4:].lower()) for u, s, b in GPUS)),
        PATH=f"{bin_dir}:{env['PATH']}",
        GPUTOP_GPU_PROBE="ctypes",  # the C libcuda answers ctypes; a torch here has no CUDA
    )
    yield Machine(env, c_nvml, scenario, data)
    sleeper.terminate()
    sleeper.wait()


def list_the_suites_processes(
    machine: Machine, suites: list[subprocess.Popen[str]], stop: threading.Event
) -> None:
    """While the suite runs: each CUDA process it starts holding memory on one card (its own,
    found among the suite's descendants) is put in the C NVML's listing."""
    try:
        while not stop.wait(0.05):  # looked at 20 times a second until the suite ends
            children = []
            for suite in suites:
                try:
                    children += psutil.Process(suite.pid).children(recursive=True)
                except psutil.NoSuchProcess:
                    continue
            holding = []
            for child in children:
                try:
                    argv = child.cmdline()
                except psutil.Error:
                    continue
                probe = any(a.endswith("cuda_probe.py") for a in argv)
                if probe and "hold" in argv and "--all" not in argv:
                    holding.append(child.pid)
            if holding and tuple(holding) != machine.listed:
                machine.list_on_gpu0(tuple(holding), held_mib=1024)
    except Exception:  # the suite's own checks then fail, saying what they did not see
        return


CHECKS = "not cpu_over and not usage_matches and (not mapping or reversed or duplicate or empty)"
SLOW_MODULES = "test_gpu_run or test_gpu_activity"
"""The job's check (its probe holds the cards ten seconds) and the activity checks' set-up:
run in a suite of their own beside the others', each with its report, so the rehearsal takes
the longer of the two, not their sum."""


def test_the_suite_runs_its_checks_and_writes_the_report(machine, tmp_path) -> None:
    reports = [tmp_path / "report-slow", tmp_path / "report"]
    logs = [(tmp_path / f"{report.name}.log").open("w+") for report in reports]
    suites = [
        subprocess.Popen(
            [
                sys.executable, str(ROOT / "tests" / "gpu" / "run_check.py"),
                "--report-dir", str(report), "-p", "no:xdist", "-k", f"{CHECKS} and {which}",
            ],
            stdout=log, stderr=subprocess.STDOUT, text=True, env=machine.env, cwd=tmp_path,
        )
        for report, log, which in zip(
            reports, logs, (f"({SLOW_MODULES})", f"not ({SLOW_MODULES})"), strict=True
        )
    ]  # fmt: skip
    stop = threading.Event()
    watcher = threading.Thread(target=list_the_suites_processes, args=(machine, suites, stop))
    watcher.start()
    try:
        for suite in suites:
            suite.wait(timeout=600)
    finally:
        stop.set()
        for suite in suites:
            if suite.poll() is None:
                suite.kill()
                suite.wait()
        watcher.join(timeout=60)
    for suite, log in zip(suites, logs, strict=True):
        log.seek(0)
        assert suite.returncode == 0, log.read()
        log.close()
    documents = [json.loads((r / "gpu-check-report.json").read_text()) for r in reports]
    document = {**documents[1], "results": [r for d in documents for r in d["results"]]}
    report = reports[1]
    outcomes = {result["name"]: result["outcome"] for result in document["results"]}
    by_name = {result["name"]: result for result in document["results"]}
    assert outcomes["driver: driver_and_cuda_versions"] == "passed"
    assert outcomes["snapshot: snapshot_matches_nvidia_smi"] == "passed"
    assert outcomes["exporter: exporter_values_equal_nvidia_smi"] == "passed"
    assert outcomes["dashboard: dashboard_shows_every_card_name_and_uuid"] == "passed"
    assert outcomes["processes: cuda_process_listed_with_pid_user_memory"] == "passed"
    assert outcomes["run: run_job_sees_exactly_the_pinned_cards"] == "passed"
    process = by_name["processes: cuda_process_listed_with_pid_user_memory"]
    assert process["numbers"]["backend"] == "ctypes"
    assert [c["ok"] for c in process["comparisons"]] == [True] * 4
    run = by_name["run: run_job_sees_exactly_the_pinned_cards"]["comparisons"][0]
    assert run["gputop"] == run["reference"] == [GPUS[1][0], GPUS[0][0]]
    mapping = sorted(name for name in outcomes if name.startswith("mapping: "))
    assert mapping == [
        f"mapping: map_matches_cuda_enumeration[{form}-{order}]"
        for form in ("a-duplicate", "empty", "every-index-reversed", "two-UUIDs-reversed")
        for order in ("FASTEST_FIRST", "PCI_BUS_ID")
    ]
    assert {outcomes[name] for name in mapping} == {"passed"}
    reversed_uuids = by_name[mapping[4]]["comparisons"][0]
    assert reversed_uuids["gputop"] == reversed_uuids["reference"] == [GPUS[1][0], GPUS[0][0]]
    activity = [r for r in document["results"] if r["name"].startswith("activity: ")]
    # skipped with its reason: here no card is a Hopper with GPM figures and torch has no
    # CUDA (before GPM landed: "no activity object" in snapshot --json)
    assert activity and {r["outcome"] for r in activity} == {"skipped"}
    assert all(r["note"] and "no activity object" not in r["note"] for r in activity)
    snapshot = by_name["snapshot: snapshot_matches_nvidia_smi"]["comparisons"]
    assert len(snapshot) == 2 * 11
    assert all(c["ok"] for c in snapshot)
    health = by_name["health: health_counters_match_nvidia_smi"]
    assert health["outcome"] == "passed"
    # each card's 11 counters (ECC four ways, retired pages, remapped rows), the H100s'
    # retired pages compared as "neither has one"
    assert len(health["comparisons"]) == 2 * 11
    assert all(c["ok"] for c in health["comparisons"])
    assert document["machine"]["driver"] == "550.127.05"
    assert document["machine"]["cuda"] == "12.4"
    assert (
        "| snapshot: snapshot_matches_nvidia_smi | passed | 22 | 0 |"
        in (report / "gpu-check-report.md").read_text()
    )


def test_the_suites_energy_counter_reads_the_drivers(machine, tmp_path) -> None:
    """cuda_probe.energy_mj, through ctypes on libnvidia-ml.so.1 (in a child: the library
    must not stay loaded in this process, where the driver check would then find it)."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from gpu.cuda_probe import energy_mj;"
        "print(json.dumps([energy_mj(u) for u in sys.argv[2:]]))"
    )
    unknown = "GPU-99999999-9999-4999-8999-999999999999"
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "tests"), GPUS[0][0], unknown],
        capture_output=True, text=True, env=machine.env, cwd=tmp_path, timeout=120, check=True,
    )  # fmt: skip
    known, missing = json.loads(done.stdout)
    assert isinstance(known, int) and known > 0
    assert missing is None
