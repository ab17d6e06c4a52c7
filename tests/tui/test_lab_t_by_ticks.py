"""The lab's t on a remote process sends the start ticks and boot id its host's snapshot
carried (so a step of the host's clock since cannot refuse it), and a host without them (an
older gputop) the start time alone, as before."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from helpers.lab_dashboard import first_lab_sample, make_lab_app
from helpers.waiting import pilot_wait_for

from gputop.core.remote.remote_jobs import RemoteResult
from gputop.core.remote.status import HostStatus
from gputop.tui.lab import lab_app
from gputop.tui.lab.fixed_hosts import simulated_status
from gputop.tui.lab.lab_processes import LabProcessTable
from gputop.tui.screens.confirm import ConfirmScreen

BOOT = "3f0c2a8e-1b2c-4d5e-8f90-123456789abc"


def _host(ticks: int | None, boot: str | None) -> HostStatus:
    """A host whose first process is alice's, with these start ticks and boot id."""
    status = simulated_status("gpu01", "v100x4")
    assert status.snapshot is not None
    gpus = list(status.snapshot.gpus)
    at = next(i for i, gpu in enumerate(gpus) if gpu.processes)
    first = dataclasses.replace(
        gpus[at].processes[0], user="alice", start_time=1.7e9, start_ticks=ticks
    )
    gpus[at] = dataclasses.replace(gpus[at], processes=(first, *gpus[at].processes[1:]))
    snapshot = dataclasses.replace(status.snapshot, gpus=tuple(gpus), boot_id=boot)
    return dataclasses.replace(status, snapshot=snapshot)


async def _remote_command_of_t(
    status: HostStatus, monkeypatch: pytest.MonkeyPatch, old_signal: bool = False
) -> str:
    """What ssh is given to run on the host after t and y (its last word); ``old_signal``:
    that host's ``gputop signal`` lacks --start-ticks, as argparse says."""
    sent: list[list[str]] = []

    def run_remote(argv: list[str], environ: Any = None) -> RemoteResult:
        sent.append(argv)
        if old_signal and "--start-ticks" in argv[-1]:
            said = "gputop signal: error: unrecognized arguments: --start-ticks 4242 --boot-id"
            return RemoteResult(False, "", said)
        return RemoteResult(True, "", "Sent SIGTERM.")

    monkeypatch.setattr(lab_app, "run_remote", run_remote)
    app = make_lab_app([status])
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        table = app.query_one(LabProcessTable)
        table.focus()
        await pilot.pause()
        await pilot_wait_for(
            pilot,
            lambda: table.current_process is not None and table.current_process.user == "alice",
            "alice's process highlighted",
            10,
        )
        await pilot.press("t")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot_wait_for(pilot, lambda: bool(sent), "the remote signal", 10)
        if old_signal:
            await pilot_wait_for(pilot, lambda: len(sent) == 2, "the signal sent again", 10)
            await pilot_wait_for(pilot, lambda: bool(app._notifications), "the answer", 10)
            assert "Sent SIGTERM." in str(list(app._notifications)[-1].message)
    return sent[-1][-1]


async def test_t_sends_the_hosts_start_ticks_and_boot_id(monkeypatch: pytest.MonkeyPatch) -> None:
    command = await _remote_command_of_t(_host(4242, BOOT), monkeypatch)

    # before: --start-time alone, refused by the host after a step of its clock
    assert f"--start-ticks 4242 --boot-id {BOOT}" in command
    assert "--start-time 1700000000.0" in command


@pytest.mark.parametrize(("ticks", "boot"), [(None, None), (4242, None), (None, BOOT)])
async def test_t_on_a_host_without_them_sends_the_start_time_alone(
    monkeypatch: pytest.MonkeyPatch, ticks: int | None, boot: str | None
) -> None:
    command = await _remote_command_of_t(_host(ticks, boot), monkeypatch)

    assert "--start-ticks" not in command and "--boot-id" not in command  # an older gputop
    assert "--start-time 1700000000.0" in command


async def test_t_on_a_host_whose_signal_lacks_the_option_sends_it_again_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    command = await _remote_command_of_t(_host(4242, BOOT), monkeypatch, old_signal=True)

    assert "--start-ticks" not in command and "--start-time 1700000000.0" in command
