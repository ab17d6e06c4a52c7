"""Reduced mode: nvidia-smi's CSV frames turned into the Snapshot model."""

from __future__ import annotations

import subprocess

from gputop.core.remote.reduced import MIB, ReducedFrames, parse_gpu_line
from gputop.core.remote.remote_command import agent_script, remote_gputop_command

UUID = "GPU-aaaa0000-1111-2222-3333-444444444444"
GPU_LINE = (
    f"0, {UUID}, 00000000:07:00.0, 81920, 1024.5, 80895, 3, [N/A], 35, 30, 71.25, 700.00, "
    "1980, 1980, 2619, 1980, 1980, 2619, P0, 550.54.15, NVIDIA H100 80GB HBM3, rev, B"
)


def frame(host: str, *lines: str) -> ReducedFrames:
    frames = ReducedFrames(host, clock=lambda: 1000.0)
    for line in lines:
        frames.feed(line + "\n")
    return frames


def test_a_gpu_line_gives_every_field_nvidia_smi_offers_and_none_for_na() -> None:
    gpu, driver = parse_gpu_line(GPU_LINE, [])

    assert (gpu.physical_index, gpu.uuid, driver) == (0, UUID, "550.54.15")
    assert gpu.name == "NVIDIA H100 80GB HBM3, rev, B"  # the name may hold the separator
    assert (gpu.memory_total_bytes, gpu.memory_used_bytes) == (81920 * MIB, int(1024.5 * MIB))
    assert (gpu.utilization_gpu_percent, gpu.utilization_memory_percent) == (3, None)
    assert (gpu.power_w, gpu.performance_state, gpu.clocks.memory_mhz) == (71.25, 0, 2619)


def test_a_frame_becomes_a_snapshot_with_processes_on_their_gpu() -> None:
    frames = ReducedFrames("gpu9", clock=lambda: 1000.0)
    for line in ["@gpus", GPU_LINE, "@apps", f"{UUID}, 77, 512, /usr/bin/python3"]:
        assert frames.feed(line + "\n") is None
    snapshot = frames.feed("@end\n")

    assert snapshot is not None
    assert (snapshot.host, snapshot.driver_version, snapshot.timestamp) == (
        "gpu9",
        "550.54.15",
        1000.0,
    )
    (process,) = snapshot.gpus[0].processes
    assert (process.pid, process.physical_index, process.user) == (77, 0, None)
    assert process.command == ("/usr/bin/python3",)
    assert process.used_memory_bytes == 512 * MIB


def test_a_malformed_line_is_skipped_and_counted_not_fatal() -> None:
    frames = frame("gpu9", "@gpus", "garbage", GPU_LINE, "@apps", "x, notapid, 1, y")
    snapshot = frames.feed("@end\n")

    assert frames.skipped_lines == 2
    assert snapshot is not None and len(snapshot.gpus) == 1


def test_agent_script_is_valid_posix_sh_and_quotes_its_interval() -> None:
    script = agent_script(0.5)

    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0
    assert "exec gputop agent --interval 0.5;" in script


def test_remote_gputop_command_quotes_every_word_once(tmp_path) -> None:
    recorder = tmp_path / "gputop"
    recorder.write_text('#!/bin/sh\nfor arg in "$@"; do printf "%s\\n" "$arg"; done\n')
    recorder.chmod(0o755)
    words = ["run", "--", "echo", "$HOME; rm -rf /", "it's", "a b", "`id`"]
    command = remote_gputop_command(["gputop", *words])

    # What sshd does with it: the login shell runs the string once.
    result = subprocess.run(
        ["sh", "-c", command],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "GPUTOP_PATH": str(tmp_path), "HOME": str(tmp_path)},
    )

    assert result.stdout.splitlines() == words
