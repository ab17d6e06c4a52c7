"""Xids from the real kernel log (issue 42), where the kernel takes a line written to
/dev/kmsg (as root): gputop's reader follows the real log, and a line a process wrote there,
in the driver's own words, is no Xid: the kernel marks it with the user facility, which no
kernel record has (docs/health.md). Elsewhere it skips; the record format of the kernel's
own records is tests/unit/test_health_kmsg.py's and test_attack_kmsg_forged_xid.py's."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from helpers.scenarios import minimal_gpu
from helpers.waiting import wait_for

from gputop.core.fake import FakeNvml, load_scenario
from gputop.core.model import GpuHealth
from gputop.core.sampling.kmsg_xid import KMSG, READ_SIZE, parse_record
from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions
from gputop.core.sampling.nvml_health import KERNEL_LOG

WriteScenario = Callable[..., str]


def open_with_log(path: str, log: str) -> NvmlBackend:
    nvml = FakeNvml(load_scenario(path))
    nvml.nvmlInit()
    return NvmlBackend(
        nvml, clock=nvml.epoch_time, options=SamplingOptions(claims=False), kernel_log=log
    )


def health_of(backend: NvmlBackend) -> GpuHealth:
    health = backend.sample().gpus[0].health
    assert health is not None
    return health


def written_record(marker: bytes) -> bytes | None:
    """The record of the real log whose text holds ``marker``, as the kernel gives it."""
    fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                record = os.read(fd, READ_SIZE)
            except BlockingIOError:
                return None
            except BrokenPipeError:  # records overwritten before they were read: go on
                continue
            if marker in record:
                return record
    finally:
        os.close(fd)


def test_a_line_a_process_wrote_to_the_real_kernel_log_is_no_xid(
    scenario_file: WriteScenario,
) -> None:
    """As root, where the kernel takes a line written to /dev/kmsg; a bus no card here has.
    The kernel gives the line the user facility even where it asks for the kernel's (``<4>``
    is facility 0, level 4); the reader, which follows the real log, counts nothing of it,
    and later records are still read (the reader is not stuck on it)."""
    if os.geteuid() != 0 or not os.access(KMSG, os.R_OK | os.W_OK):
        pytest.skip("needs root and a writable /dev/kmsg (the record format is tested above)")
    bus = "00000000:E7:1F.0"
    backend = open_with_log(scenario_file([minimal_gpu(pci_bus_id=bus)]), KMSG)
    before = dict(health_of(backend).xid_counts).get(61, 0)
    marker = b"gputop-test-%d" % os.getpid()
    try:
        with open(KMSG, "wb", buffering=0) as kmsg:
            kmsg.write(b"<4>NVRM: Xid (PCI:0000:e7:1f): 61, pid=1, name=" + marker + b", a test\n")
    except OSError as error:
        pytest.skip(f"the kernel refused a line in /dev/kmsg: {error}")
    record = wait_for(lambda: written_record(marker), "the line written to /dev/kmsg, in the log")
    facility = int(record.split(b",", 1)[0]) >> 3
    assert facility == 1, record  # the user facility, though the line asked for the kernel's
    assert record.split(b";", 1)[1].startswith(b"NVRM: Xid (PCI:0000:e7:1f): 61,")
    assert parse_record(record) is None
    health = health_of(backend)
    assert dict(health.xid_counts).get(61, 0) == before
    assert KERNEL_LOG in health.xid_sources  # the reader did follow the real log
    backend.close()
