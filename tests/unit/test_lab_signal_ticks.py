"""The lab's t/T after a step of a host's clock: the host's snapshot carries each process's
start in clock ticks since boot and the host's boot id, and ``gputop signal --start-ticks
--boot-id`` proves the process by them, which no clock moves. The start time the snapshot
carried was read before the step; compared with one read after it, the same process read as
another and the signal was refused. Hosts whose snapshots lack the ticks (an older gputop,
without the options) are sent ``--start-time`` alone, as before."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.hostile_hosts import NOW, agent_lines, good_document, replay

from gputop.cli.main import main
from gputop.core.process_control import current_boot_id, process_start
from gputop.core.remote.protocol import snapshot_from_json
from gputop.core.remote.remote_jobs import signal_argv
from gputop.core.snapshot_json import snapshot_to_json

STEP_S = 3600.0
OTHER_BOOT = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def _boot_id() -> str:
    boot = current_boot_id()
    if boot is None:
        pytest.skip("this machine has no boot id")
    return boot


def _remote_words(argv: list[str], tmp_path: Path) -> list[str]:
    """The words ``gputop`` receives on the host: the ssh command's last word run by ``sh``,
    with a stand-in ``gputop`` that prints them (as tests/unit/test_lab_remote_commands.py)."""
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        script = bin_dir / "gputop"
        script.write_text('#!/bin/sh\nfor word in "$@"; do printf "%s\\0" "$word"; done\n')
        script.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPUTOP_PATH": str(bin_dir)}
    result = subprocess.run(
        ["sh", "-c", argv[-1]], env=env, cwd=tmp_path, capture_output=True, check=True
    )
    return result.stdout.decode().split("\0")[:-1]


def test_a_hosts_snapshot_carries_start_ticks_and_its_boot_id_through_the_protocol() -> None:
    document = good_document()
    gpu = next(g for g in document["gpus"] if g["processes"])
    gpu["processes"][0]["start_ticks"] = 123456
    document["boot_id"] = OTHER_BOOT
    skewed = dict(document, timestamp=NOW + 10 * STEP_S)  # a host's clock far off

    status = replay("gpu1", [agent_lines(document)[1]])
    off = replay("gpu1", [agent_lines(skewed)[1]])

    for seen in (status, off):
        assert seen.snapshot is not None and seen.snapshot.boot_id == OTHER_BOOT
        process = next(g for g in seen.snapshot.gpus if g.processes).processes[0]
        assert process.start_ticks == 123456  # no clock moves them: kept even when off
    assert next(g for g in off.snapshot.gpus if g.processes).processes[0].start_time is None


@pytest.mark.parametrize("ticks", [-1, 2**63, 10**400])
@pytest.mark.parametrize("boot", ["x; rm -rf ~", "A" * 36, 7, None])
def test_a_hosts_impossible_ticks_or_boot_id_are_not_used(ticks: int, boot: object) -> None:
    document = good_document()
    gpu = next(g for g in document["gpus"] if g["processes"])
    gpu["processes"][0]["start_ticks"] = ticks
    document["boot_id"] = boot

    status = replay("gpu1", [agent_lines(document)[1]])

    if isinstance(boot, int):  # not even text: the line is unreadable
        assert status.snapshot is None and status.unreadable_lines == 1
        return
    assert status.snapshot is not None and status.snapshot.boot_id is None
    assert next(g for g in status.snapshot.gpus if g.processes).processes[0].start_ticks is None
    assert status.impossible_values >= 1


def test_this_hosts_snapshot_json_has_its_boot_id_and_each_processs_ticks(sleeper) -> None:
    snapshot = snapshot_from_json(good_document())
    started = process_start(sleeper.pid)
    gpu = next(g for g in snapshot.gpus if g.processes)
    process = dataclasses.replace(gpu.processes[0], start_ticks=started.ticks)
    gpu = dataclasses.replace(gpu, processes=(process,))
    document = snapshot_to_json(dataclasses.replace(snapshot, gpus=(gpu,), boot_id=_boot_id()))

    assert document["boot_id"] == _boot_id()
    assert document["gpus"][0]["processes"][0]["start_ticks"] == started.ticks


def test_the_lab_sends_the_ticks_only_to_a_host_whose_snapshot_has_them(tmp_path: Path) -> None:
    new = signal_argv("gpu1", 4242, 1.7e9, "SIGTERM", None, 98765, OTHER_BOOT)
    old = signal_argv("gpu1", 4242, 1.7e9, "SIGTERM", None, None, None)
    half = signal_argv("gpu1", 4242, 1.7e9, "SIGTERM", None, 98765, None)

    assert _remote_words(new, tmp_path)[-4:] == ["--start-ticks", "98765", "--boot-id", OTHER_BOOT]
    assert "--start-ticks" not in _remote_words(old, tmp_path)  # an older gputop lacks the option
    assert _remote_words(old, tmp_path)[-2:] == ["--start-time", "1700000000.0"]
    assert _remote_words(half, tmp_path) == _remote_words(old, tmp_path)


def test_gputop_signal_by_ticks_reaches_the_process_after_a_step_of_the_clock(
    sleeper: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    started = process_start(sleeper.pid)
    assert started.time is not None and started.ticks is not None
    before_step = repr(started.time - STEP_S)  # what the snapshot said, before the step

    refused = main(["signal", str(sleeper.pid), "--start-time", before_step, "--yes"])
    assert refused != 0 and sleeper.poll() is None  # the start time alone: refused
    capsys.readouterr()
    code = main(
        [
            "signal",
            str(sleeper.pid),
            "--start-time",
            before_step,
            "--start-ticks",
            str(started.ticks),
            "--boot-id",
            _boot_id(),
            "--yes",
        ]
    )

    assert code == 0, capsys.readouterr().err  # before: --start-ticks unknown, exit 2
    assert sleeper.wait(10) == -15


def test_a_host_with_no_trusted_start_time_is_signalled_by_its_ticks(
    sleeper: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    """A host whose clock is off sends no start time the lab trusts: the ticks alone prove."""
    ticks = str(process_start(sleeper.pid).ticks)
    argv = ["signal", str(sleeper.pid), "--start-ticks", ticks, "--boot-id", _boot_id(), "--yes"]

    assert main(argv) == 0, capsys.readouterr().err
    assert sleeper.wait(10) == -15


@pytest.mark.parametrize("which", ["other ticks", "other boot"])
def test_gputop_signal_refuses_other_ticks_or_another_boot(
    sleeper: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str], which: str
) -> None:
    started = process_start(sleeper.pid)
    assert started.time is not None and started.ticks is not None
    ticks, boot = started.ticks, _boot_id()
    if which == "other ticks":
        ticks += 1
    else:
        boot = OTHER_BOOT
    argv = ["signal", str(sleeper.pid), "--start-time", repr(started.time)]
    argv += ["--start-ticks", str(ticks), "--boot-id", boot, "--yes"]

    code = main(argv)

    assert code not in (0, 70), capsys.readouterr().err
    assert capsys.readouterr().err.startswith("gputop: ")
    assert sleeper.poll() is None


@pytest.mark.parametrize(
    "extra",
    [
        ["--start-ticks", "12"],
        ["--boot-id", OTHER_BOOT],
        ["--start-ticks", "-1", "--boot-id", OTHER_BOOT],
        ["--start-ticks", "1" * 30, "--boot-id", OTHER_BOOT],
        ["--start-ticks", "12", "--boot-id", "not-a-boot"],
        ["--start-time", "nan"],
        ["--start-time", "inf"],
    ],
)
def test_gputop_signal_refuses_ticks_without_a_boot_and_impossible_values_as_usage(
    sleeper: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        code = main(["signal", str(sleeper.pid), *extra, "--yes"])
        raise SystemExit(code)

    assert ended.value.code == 2
    assert "Traceback" not in capsys.readouterr().err
    assert sleeper.poll() is None
