"""Xids from the real kernel log (issue 42): a record written to /dev/kmsg as root, where the
kernel takes one, read by gputop's reader and counted on the card of its bus id
(docs/health.md). Elsewhere it skips; the record format is tests/unit/test_health_kmsg.py's."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from helpers.scenarios import minimal_gpu
from helpers.waiting import wait_for

from gputop.core.fake import FakeNvml, load_scenario
from gputop.core.model import GpuHealth
from gputop.core.sampling.kmsg_xid import KMSG
from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions

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


def test_a_record_written_to_the_real_kernel_log_is_read(scenario_file: WriteScenario) -> None:
    """As root, where the kernel takes a line written to /dev/kmsg; a bus no card here has."""
    if os.geteuid() != 0 or not os.access(KMSG, os.R_OK | os.W_OK):
        pytest.skip("needs root and a writable /dev/kmsg (the record format is tested above)")
    bus = "00000000:E7:1F.0"
    backend = open_with_log(scenario_file([minimal_gpu(pci_bus_id=bus)]), KMSG)
    before = dict(health_of(backend).xid_counts).get(61, 0)
    try:
        with open(KMSG, "wb", buffering=0) as kmsg:
            kmsg.write(
                b"<4>NVRM: Xid (PCI:0000:e7:1f): 61, pid=1, name=gputop-test, a test record\n"
            )
    except OSError as error:
        pytest.skip(f"the kernel refused a line in /dev/kmsg: {error}")
    counted = wait_for(
        lambda: dict(health_of(backend).xid_counts).get(61, 0) == before + 1 or None,
        "the record written to /dev/kmsg",
    )
    assert counted
    event = (health_of(backend).xid_events or ())[-1]  # earlier runs' records coalesce in it
    assert event.xid == 61 and event.count == before + 1
    backend.close()
