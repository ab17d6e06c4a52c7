"""What the health sampler costs a sample (docs/speed.md, "Health"): ``nvml_health`` over the
Python fake and over the C NVML through the real nvidia-ml-py, and the kernel log reader.

On ``dgx-h100`` (8 H100s, 18 NVLink links each, ECC on): a full reading of every card's
counters (due every 10 s), a sample between readings (the Xids copied, no NVML call), and
their mean at a 1 s refresh; the kernel log reader's cost a record, draining a log of
ordinary records with an Xid in every hundredth. Each figure is the median of ``--runs``
runs in fresh processes, in microseconds of CPU time (``process_time``). A benchmark, not a
test: its name keeps pytest from collecting it.

    python tests/bench/health_bench.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCENARIO = "dgx-h100"
FULL_READINGS = 50
SAMPLES = 2000
RECORDS = 20_000


def measure(nvml: Any) -> dict[str, float]:
    """One run's figures (µs of CPU) on ``nvml``, initialised."""
    from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions
    from gputop.core.sampling.nvml_fields import FieldReader
    from gputop.core.sampling.nvml_health import HEALTH_PERIOD_S, HealthReader

    options = SamplingOptions(claims=False, driver_probe=False, health=False)
    backend = NvmlBackend(nvml, options=options)
    links = [gpu.nvlink_count for gpu in backend.sample().gpus]
    backend.close()  # it shuts NVML down: open it again for the reader
    nvml.nvmlInit()
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(len(links))]
    reader = HealthReader(nvml, FieldReader(nvml))
    for index, handle in enumerate(handles):
        reader.open_gpu(index, handle)
    now = 0.0
    started = time.process_time()
    for _ in range(FULL_READINGS):
        now += HEALTH_PERIOD_S  # every card's counters are due
        for index, handle in enumerate(handles):
            reader.read(index, handle, now, links[index])
    full = (time.process_time() - started) / FULL_READINGS * 1e6
    started = time.process_time()
    for _ in range(SAMPLES):
        for index, handle in enumerate(handles):
            reader.read(index, handle, now, links[index])
    between = (time.process_time() - started) / SAMPLES * 1e6
    reader.close()
    per_sample = (full + (HEALTH_PERIOD_S - 1) * between) / HEALTH_PERIOD_S
    return {"full_reading_us": full, "between_us": between, "per_sample_us": per_sample}


def measure_kernel_log() -> dict[str, float]:
    """µs of CPU a kernel log record, draining a file of them (the reader's start)."""
    from gputop.core.sampling.kmsg_xid import KernelLogReader

    seen: list[int] = []
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "kmsg"
        with open(path, "wb") as log:
            for n in range(RECORDS):
                if n % 100 == 0:
                    text = b"NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, Graphics Exception"
                else:
                    text = b"usb 1-1: new high-speed USB device number %d using xhci_hcd" % n
                log.write(b"6,%d,%d,-;%s\n" % (n, n * 1000, text))
        reader = KernelLogReader(lambda bus, xid, when: seen.append(xid), str(path))
        started = time.process_time()
        assert reader.start()
        took = time.process_time() - started
        reader.close()
    assert len(seen) == RECORDS // 100, len(seen)
    return {"kmsg_record_us": took / RECORDS * 1e6}


def inner(kind: str) -> None:
    if kind == "fake":
        from gputop.core.fake import FakeNvml, load_scenario, resolve_scenario_path

        nvml: Any = FakeNvml(load_scenario(resolve_scenario_path(SCENARIO)), frozen_time=30.0)
    else:
        import pynvml as nvml
    nvml.nvmlInit()
    figures = measure(nvml)
    if kind == "fake":
        figures |= measure_kernel_log()
    print(json.dumps(figures))


def c_nvml_environment(work: Path) -> dict[str, str]:
    """The C NVML of the newest generation (tests/cnvml) on ``dgx-h100``'s data."""
    sys.path.insert(0, str(REPO / "tests"))
    from cnvml import build
    from cnvml.data import write_data_file

    from gputop.core.fake import load_scenario, resolve_scenario_path

    generation = build.GENERATIONS[-1]
    library = build.build_library(generation, build.nvml_include_dir(), work)
    data = write_data_file(
        work / "data.txt",
        load_scenario(resolve_scenario_path(SCENARIO)),
        30.0,
        driver_version=generation.driver_version,
        nvml_version=generation.nvml_version,
        default_cuda_driver_version=generation.cuda_driver_version,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_FAKE")}
    return env | {"LD_LIBRARY_PATH": str(library), "GPUTOP_CNVML_DATA": str(data)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--inner", choices=("fake", "c"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.inner)
        return
    with tempfile.TemporaryDirectory() as directory:
        envs = {"fake": dict(os.environ), "c": c_nvml_environment(Path(directory))}
        results: dict[str, list[dict[str, float]]] = {"fake": [], "c": []}
        for _ in range(args.runs):
            for kind, env in envs.items():
                done = subprocess.run(
                    [sys.executable, __file__, "--inner", kind],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=REPO,
                )
                results[kind].append(json.loads(done.stdout))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}; median (min-max) of {args.runs}")
    for kind, runs in results.items():
        for key in runs[0]:
            values = [run[key] for run in runs]
            print(
                f"{kind:>4} {key:<16} {statistics.median(values):9.1f} µs "
                f"({min(values):.1f}-{max(values):.1f})"
            )


if __name__ == "__main__":
    main()
