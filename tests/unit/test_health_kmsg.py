"""Xids from the kernel log (issue 42): the record format, matching by bus id, one count for
an Xid both sources report, a log this user may not read (a real /dev/kmsg record:
tests/real/test_health_kmsg_real.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from helpers.scenarios import minimal_gpu
from helpers.waiting import wait_for

from gputop.core.fake import FakeNvml, load_scenario
from gputop.core.model import GpuHealth
from gputop.core.sampling.kmsg_xid import boot_epoch, bus_key, parse_record
from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions
from gputop.core.sampling.nvml_fields import FieldReader
from gputop.core.sampling.nvml_health import KERNEL_LOG, NVML_EVENTS, HealthReader

WriteScenario = Callable[..., str]
BUS = "00000000:07:00.0"
FALLEN = (
    b"NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
)


def record(message: bytes, since_boot_s: float = 12.5, sequence: int = 1) -> bytes:
    return b"3,%d,%d,-;%s\n" % (sequence, round(since_boot_s * 1_000_000), message)


def now_since_boot() -> float:
    return time.time() - boot_epoch()


def test_the_kernels_record_format_gives_bus_code_and_time() -> None:
    assert parse_record(record(FALLEN)) == ((0, 7, 0), 79, 12.5)
    hopper = b"4,99,5678901234,-;NVRM: Xid (PCI:0000:3b:00.0): 119, pid=1234, name=python, Timeout"
    assert parse_record(hopper) == ((0, 0x3B, 0), 119, 5678.901234)
    assert parse_record(record(b"NVRM: loading NVIDIA UNIX x86_64 Kernel Module")) is None
    assert parse_record(record(b"NVRM: Xid (PCI:0000:07:00): 99999999999, x")) is None
    assert parse_record(record(b"NVRM: Xid (PCI:0000:07:00): 0, x")) is None
    assert parse_record(b"not a record at all") is None
    assert bus_key(BUS) == bus_key("0000:07:00") == (0, 7, 0)
    assert bus_key("garbage") is None and bus_key(None) is None


def open_with_log(path: str, log: str) -> tuple[FakeNvml, NvmlBackend]:
    """A running clock (epoch time as the kernel log's), the kernel log at ``log``."""
    nvml = FakeNvml(load_scenario(path))
    nvml.nvmlInit()
    backend = NvmlBackend(
        nvml, clock=nvml.epoch_time, options=SamplingOptions(claims=False), kernel_log=log
    )
    return nvml, backend


def health_of(backend: NvmlBackend) -> GpuHealth:
    health = backend.sample().gpus[0].health
    assert health is not None
    return health


def test_records_from_before_and_while_gputop_runs_reach_the_card_by_bus_id(
    scenario_file: WriteScenario, tmp_path: Path
) -> None:
    log = tmp_path / "kmsg"
    other_card = FALLEN.replace(b"0000:07:00", b"0000:08:00")
    log.write_bytes(record(FALLEN, 3.0) + record(other_card, 4.0, 2) + b" DEVICE=+pci:x\n")
    _, backend = open_with_log(scenario_file([minimal_gpu(pci_bus_id=BUS)]), str(log))
    health = health_of(backend)  # what the log held is read before the first sample
    assert health.xid_sources == (NVML_EVENTS, KERNEL_LOG)
    assert health.xid_counts == ((79, 1),)
    assert health.xid_events is not None
    assert abs(health.xid_events[0].time - (boot_epoch() + 3.0)) < 1.0
    with log.open("ab") as appending:
        appending.write(record(b"NVRM: Xid (PCI:0000:07:00): 13, pid=7, name=python", 9.0, 3))
    wait_for(lambda: health_of(backend).xid_counts == ((13, 1), (79, 1)), "the new record")
    backend.close()


def test_an_xid_both_sources_report_is_counted_once(
    scenario_file: WriteScenario, tmp_path: Path
) -> None:
    nvml = FakeNvml(load_scenario(scenario_file([minimal_gpu(pci_bus_id=BUS)])))
    nvml.nvmlInit()
    reader = HealthReader(nvml, FieldReader(nvml))
    reader.open_gpu(0, nvml.nvmlDeviceGetHandleByIndex(0))
    log = tmp_path / "kmsg"
    log.write_bytes(b"")
    reader.start_kernel_log(str(log), {(0, 7, 0): 0})
    t = time.time()
    reader.count_xid(0, 48, t, KERNEL_LOG)
    reader.count_xid(0, 48, t + 1.0, NVML_EVENTS)  # the same Xid, seen by the event set
    reader.count_xid(0, 48, t + 20.0, NVML_EVENTS)  # a new one
    reader.count_xid(0, 13, t + 20.5, NVML_EVENTS)
    reader.count_xid(0, 13, t + 20.6, NVML_EVENTS)  # two of the event set's, kept both
    reader.count_xid(0, 13, t + 21.0, KERNEL_LOG)  # the kernel's copy of the first
    health = reader.last(0) or reader.read(0, nvml.nvmlDeviceGetHandleByIndex(0), t, None)
    assert health.xid_counts == ((13, 2), (48, 2))
    reader.close()


def test_an_xid_in_the_log_and_queued_in_the_event_set_at_start_counts_once(
    scenario_file: WriteScenario, tmp_path: Path
) -> None:
    log = tmp_path / "kmsg"
    log.write_bytes(record(FALLEN, now_since_boot()))  # the kernel's copy, just now
    path = scenario_file([minimal_gpu(pci_bus_id=BUS, xid_events=[{"at_s": 0, "xid": 79}])])
    _, backend = open_with_log(path, str(log))
    assert health_of(backend).xid_counts == ((79, 1),)
    backend.close()


def test_a_kernel_log_this_user_may_not_read_is_named_and_xids_are_not_none(
    scenario_file: WriteScenario, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-kmsg")
    _, backend = open_with_log(scenario_file([minimal_gpu()]), missing)
    health = health_of(backend)
    assert health.xid_sources == (NVML_EVENTS,)
    assert health.xid_events == ()
    assert any(r.startswith("kernel log (") and missing in r for r in health.refused)
    backend.close()


def test_with_neither_source_open_xids_are_unknown(
    scenario_file: WriteScenario, tmp_path: Path
) -> None:
    path = scenario_file([minimal_gpu()], missing_functions=["nvmlEventSetCreate"])
    _, backend = open_with_log(path, str(tmp_path / "no-kmsg"))
    health = health_of(backend)
    assert health.xid_events is None and health.xid_sources == ()
    backend.close()
