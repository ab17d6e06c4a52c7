"""``l`` in the fleet dashboard launches on a free node through a real sshd on 127.0.0.1
(tests/helpers/sshd.py), as ``gputop run --hosts NODE`` does, where the node's name is an
ssh destination (a Host of the ssh config); a name that is not a plain host name is refused
before anything runs. The fleet is built here from what Prometheus would answer (the real
Prometheus is tests/real/test_fleet_prometheus.py's). docs/fleet.md."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.claims import uuids
from helpers.sshd import SshServer, start_server
from helpers.waiting import pilot_wait_for
from textual.widgets import DataTable, Input, Static

from gputop.core.fleet.model import Fleet, build_fleet
from gputop.core.jobs.store import JobStore
from gputop.core.prometheus.client import Sample
from gputop.core.remote.transport import SSH_CONFIG_ENV
from gputop.tui.fleet.fleet_app import FleetApp
from gputop.tui.fleet.fleet_views import TextScreen
from gputop.tui.lab.remote_screens import RemoteLaunchScreen

NOW = 1_800_000_000.0
WAIT_S = 60.0


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshServer]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # no ssh config or hosts.toml of this machine's
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    started = start_server(tmp_path)
    monkeypatch.setenv(SSH_CONFIG_ENV, str(started.ssh_config))
    yield started
    started.kill()


def node_fleet(hosts: dict[str, dict[int, str]]) -> Fleet:
    """One dcgm-exporter node per host (its cards by index and UUID), every card free."""
    up, scraped, scrapes, cards = [], [], [], []
    for n, (host, card_uuids) in enumerate(hosts.items()):
        target = {"job": "dcgm", "instance": f"10.0.0.{n}:9400"}
        up.append(Sample(target, NOW, 1.0))
        scraped.append(Sample(target, NOW, NOW - 2))
        scrapes.append(Sample(target, NOW, 9.0))
        for index, uuid in card_uuids.items():
            labels = {**target, "gpu": str(index), "UUID": uuid, "Hostname": host}
            for name, value in (
                ("DCGM_FI_DEV_FB_USED", 0.0),
                ("DCGM_FI_DEV_FB_FREE", 16000.0),
                ("DCGM_FI_DEV_GPU_UTIL", 0.0),
            ):
                cards.append(Sample({**labels, "__name__": name}, NOW, value))
    answers = {"up": up, "scraped": scraped, "scrapes": scrapes, "cards": cards}
    return build_fleet("http://prometheus:9090", NOW, answers, 7)


def screen_text(app: FleetApp) -> str:
    return "".join(str(widget.render()) for widget in app.screen.query(Static))


async def test_l_launches_on_a_free_node_that_is_an_ssh_destination(
    server: SshServer, tmp_path: Path
) -> None:
    cards = uuids()  # gpu-v100 is the v100x4 scenario over ssh
    fleet = node_fleet({"gpu-v100": {1: cards[1], 2: cards[2]}})
    seen = tmp_path / "seen.txt"
    app = FleetApp(lambda: fleet, "http://prometheus:9090")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", WAIT_S)
        await pilot.press("l")
        await pilot_wait_for(
            pilot, lambda: isinstance(app.screen, RemoteLaunchScreen), "the dialog", WAIT_S
        )
        assert "Launch on gpu-v100: GPU 1, GPU 2" in screen_text(app)
        field = app.screen.query_one("#command", Input)
        field.value = f"sh -c 'echo \"$CUDA_VISIBLE_DEVICES\" > {seen}'"
        field.focus()
        await pilot.press("enter")
        await pilot_wait_for(
            pilot, lambda: not isinstance(app.screen, RemoteLaunchScreen), "launched", WAIT_S
        )
        await pilot_wait_for(
            pilot, lambda: seen.exists() and seen.read_text().strip(), "its file", WAIT_S
        )
    assert seen.read_text().strip() == ",".join(cards[1:3])
    with JobStore.open(server.state_dir("gpu-v100")) as store:
        (job,) = store.list_jobs()
    assert job.physical_indices == (1, 2)


async def test_a_node_not_named_for_ssh_gets_what_to_run(server: SshServer) -> None:
    fleet = node_fleet({"gpu-elsewhere": {0: "GPU-aaaa-0", 1: "GPU-aaaa-1"}})
    app = FleetApp(lambda: fleet, "http://prometheus:9090")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", WAIT_S)
        await pilot.press("l")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, TextScreen), "advice", WAIT_S)
        text = screen_text(app)
    assert "not in hosts.toml nor a Host of your ssh config" in text
    assert "gputop run --hosts gpu-elsewhere --auto 2 -- COMMAND" in text


@pytest.mark.parametrize(
    "hostile",
    [
        "-oProxyCommand=touch${IFS}PWNED",
        "gpu-v100 -oProxyCommand=touch PWNED",
        "gpu-v100;touch PWNED",
        "gpu-v100\x1b]0;title\x07",
    ],
)
async def test_a_hostile_node_name_is_refused_before_anything_runs(
    server: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostile: str
) -> None:
    monkeypatch.chdir(tmp_path)
    hosts_file = tmp_path / "home" / ".config" / "gputop" / "hosts.toml"
    hosts_file.parent.mkdir(parents=True)
    hosts_file.write_text(f"[groups]\nall = [{json.dumps(hostile)}]\n")  # even named there
    server.add_alias("*PWNED*")  # even a Host pattern that would match it
    fleet = node_fleet({hostile: {1: uuids()[1]}})
    app = FleetApp(lambda: fleet, "http://prometheus:9090")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", WAIT_S)
        app.query_one("#fleet-nodes", DataTable).move_cursor(row=0)
        await pilot.press("l")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, TextScreen), "refusal", WAIT_S)
        text = screen_text(app)
    assert "is not a plain host name" in text
    assert "\x1b" not in text
    assert not (tmp_path / "PWNED").exists()
    assert not server.state_dir("gpu-v100").exists()
