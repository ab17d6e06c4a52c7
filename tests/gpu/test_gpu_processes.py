"""A CUDA process the check starts, holding a known amount, as gputop and nvidia-smi list it."""

from __future__ import annotations

import pytest

from gpu.driver import DRIVER

if not DRIVER.present:
    pytest.skip(DRIVER.reason, allow_module_level=True)

from gpu import compare
from gpu.conftest import (
    gputop_json,
    overhead_mib,
    smi_apps,
    smi_list,
    target_card,
    user_name,
    wait_for_file,
)

HELD_BYTES = 1 << 30


def test_cuda_process_listed_with_pid_user_memory(result, gputop, probe, tmp_path) -> None:
    visible, gpu_uuid = target_card(smi_list())
    ready, stop = tmp_path / "ready.json", tmp_path / "stop"
    process = probe(
        "hold",
        "--bytes",
        str(HELD_BYTES),
        "--ready",
        str(ready),
        "--stop",
        str(stop),
        "--seconds",
        "300",
        extra={"CUDA_VISIBLE_DEVICES": visible},
    )
    held = wait_for_file(ready, 180, process)
    assert "error" not in held, held
    before = smi_apps()
    document = gputop_json(gputop, "snapshot", "--json")
    after = smi_apps()
    stop.touch()
    result.numbers.update(
        {"pid": process.pid, "backend": held["backend"], "held_mib": HELD_BYTES / compare.MIB}
    )
    apps = before if any(app.pid == process.pid for app in before) else after
    result.comparisons += compare.process_comparisons(
        document,
        apps,
        pid=process.pid,
        user=user_name(),
        gpu_uuid=gpu_uuid,
        held_bytes=HELD_BYTES,
        overhead_mib=overhead_mib(),
    )
    assert not result.failed, [c.to_json() for c in result.failed]
