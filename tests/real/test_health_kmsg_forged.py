"""Another user forging an Xid through the real kernel (tests/unit/test_attack_kmsg_forged_xid.py
has the records): uid 65534, in a user namespace of its own (``unshare -Urm``), mounts an
overlayfs whose lower directory is named like the driver's Xid record; the kernel logs the
failure, quoting it, in /dev/kmsg. gputop's reader, reading the real /dev/kmsg, counted an Xid
79 on that card; it counts none now. The reader is opened after the record is in the log:
what the log holds is read before the first sample, so the sample has read past it (a record
written after it as root no longer marks the place: no line a process writes is an Xid).
Skips where the kernel lets no user mount in a user namespace, or where
/dev/kmsg cannot be read and written as root."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

import pytest
from helpers.other_user import as_other_user
from helpers.scenarios import minimal_gpu

from gputop.core.fake import FakeNvml, load_scenario
from gputop.core.sampling.kmsg_xid import KMSG
from gputop.core.sampling.nvml_backend import NvmlBackend, SamplingOptions
from gputop.core.sampling.nvml_health import KERNEL_LOG

WriteScenario = Callable[..., str]
BUS = "00000000:E7:1E.0"


def kernel_log_holds(text: bytes) -> bool:
    fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                if text in os.read(fd, 8192):
                    return True
            except BlockingIOError:
                return False
            except BrokenPipeError:  # records overwritten while reading: read on
                continue
    finally:
        os.close(fd)


def test_another_users_path_quoted_by_the_kernel_is_no_xid(scenario_file: WriteScenario) -> None:
    if os.geteuid() != 0 or not os.access(KMSG, os.R_OK | os.W_OK):
        pytest.skip("needs root and a readable, writable /dev/kmsg")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare (util-linux)")
    marker = f"gputop-forged-{os.getpid()}".encode()
    path = b"/" + marker + rb" NVRM\: Xid (PCI\:0000\:e7\:1e)\: 79, pid=1, x"
    mounted = as_other_user(
        [
            unshare,
            "-Urm",
            "mount",
            "-t",
            "overlay",
            "overlay",
            "-o",
            f"lowerdir={path.decode()},upperdir=/nonexistent/u,workdir=/nonexistent/w",
            "/tmp",
        ]
    )
    assert mounted.returncode != 0  # the mount fails: its message is the point
    if not kernel_log_holds(marker + b" NVRM: Xid (PCI:0000:e7:1e): 79"):
        pytest.skip(f"the kernel logged no such message: {mounted.stderr.strip()[:200]}")
    nvml = FakeNvml(load_scenario(scenario_file([minimal_gpu(pci_bus_id=BUS)])))
    nvml.nvmlInit()
    backend = NvmlBackend(
        nvml, clock=nvml.epoch_time, options=SamplingOptions(claims=False), kernel_log=KMSG
    )
    try:
        health = backend.sample().gpus[0].health
        assert health is not None and KERNEL_LOG in health.xid_sources  # it read the log
        assert dict(health.xid_counts).get(79, 0) == 0  # the forged ones, this run's too
    finally:
        backend.close()
