"""The lab view end to end through a real sshd on 127.0.0.1 (tests/helpers/sshd.py)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.sshd import FAKE_UUID_1, REDUCED_ALIAS, SshServer, start_server

from gputop.cli.main import main
from gputop.core.jobs.store import JobStore
from gputop.core.remote.host_link import HostLink
from gputop.core.remote.status import HostStatus, LinkState, Mode
from gputop.core.remote.transport import SSH_CONFIG_ENV

WAIT_S = 30.0


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshServer]:
    started = start_server(tmp_path)
    monkeypatch.setenv(SSH_CONFIG_ENV, str(started.ssh_config))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user hosts.toml
    yield started
    started.kill()


@pytest.fixture
def links(server: SshServer) -> Iterator[list[HostLink]]:
    """HostLinks to stop at the end, whatever the test did."""
    opened: list[HostLink] = []
    yield opened
    for link in opened:
        link.stop()


def open_link(links: list[HostLink], host: str, **options: float) -> HostLink:
    link = HostLink(host, interval_s=0.5, first_retry_s=0.2, max_retry_s=1.0, **options)
    links.append(link.start())
    return link


def is_live(status: HostStatus) -> bool:
    return status.state is LinkState.LIVE


def lab_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main(["snapshot", "--json", *argv])
    document = json.loads(capsys.readouterr().out)
    document["exit_code"] = code
    return document


def test_snapshot_hosts_lists_every_host_with_its_own_gpus(
    server: SshServer, capsys: pytest.CaptureFixture[str]
) -> None:
    document = lab_json(capsys, "--hosts", "gpu-v100,gpu-dgx,local", "--fake", "mixed")

    assert document["kind"] == "lab"
    hosts = {entry["host"]: entry for entry in document["hosts"]}
    assert list(hosts) == ["gpu-v100", "gpu-dgx", "local"]
    assert [hosts[h]["state"] for h in hosts] == ["live", "live", "live"]
    assert [hosts[h]["mode"] for h in hosts] == ["full", "full", "local"]
    assert hosts["gpu-v100"]["snapshot"]["gpus"][0]["name"] == "Tesla V100-SXM2-16GB"
    assert len(hosts["gpu-v100"]["snapshot"]["gpus"]) == 4
    assert len(hosts["gpu-dgx"]["snapshot"]["gpus"]) == 8
    assert hosts["local"]["snapshot"]["host"] != hosts["gpu-dgx"]["snapshot"]["host"]


def test_snapshot_text_has_a_section_per_host_headed_by_its_status(
    server: SshServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["snapshot", "--hosts", "gpu-v100,gpu-closed"])
    out = capsys.readouterr().out

    assert code == 0
    assert "== gpu-v100: live ==" in out
    assert "[3] Tesla V100-SXM2-16GB" in out
    assert "== gpu-closed: unreachable: connection refused (no sshd listening there) ==" in out


def test_each_host_carries_its_jobs_and_remote_user(
    server: SshServer, capsys: pytest.CaptureFixture[str]
) -> None:
    document = lab_json(capsys, "--hosts", "gpu-v100")

    (entry,) = document["hosts"]
    assert entry["jobs"] == []
    assert entry["jobs_error"] is None
    assert entry["user"]


def test_host_without_gputop_runs_in_reduced_mode_from_nvidia_smi(
    server: SshServer, capsys: pytest.CaptureFixture[str]
) -> None:
    document = lab_json(capsys, "--hosts", REDUCED_ALIAS)

    (entry,) = document["hosts"]
    if entry["mode"] == "full":
        pytest.skip("a gputop is on the test user's remote PATH, so reduced mode cannot occur")
    assert (entry["state"], entry["mode"]) == ("live", "reduced")
    assert "gputop hosts install gpu-reduced" in entry["status"]
    first, second = entry["snapshot"]["gpus"]
    assert (first["utilization_gpu"], first["fan_percent"], second["power_w"]) == (97, None, None)
    assert first["memory_used_bytes"] == 12000 * 1024 * 1024
    assert entry["snapshot"]["driver_version"] == "535.104.05"
    (process,) = first["processes"]
    assert (process["pid"], process["user"]) == (4242, None)
    assert process["command"] == ["python train.py --name a, b"]


@pytest.mark.parametrize(
    ("alias", "kind", "advice"),
    [
        ("gpu-newkey", "host-key", "run `ssh gpu-newkey` once to accept its key"),
        ("gpu-nokey", "auth", "set up key authentication"),
        ("gpu-closed", "refused", None),
        ("no-such-host.invalid", "resolve", "check the name"),
    ],
)
def test_unreachable_host_says_why_and_what_to_run(
    server: SshServer, capsys: pytest.CaptureFixture[str], alias: str, kind: str, advice: str | None
) -> None:
    document = lab_json(capsys, "--hosts", f"gpu-v100,{alias}")

    good, bad = document["hosts"]
    assert good["state"] == "live"
    assert (bad["state"], bad["failure"]["kind"]) == ("unreachable", kind)
    if advice is not None:
        assert advice in bad["failure"]["advice"]


def test_a_name_that_is_not_a_host_is_refused_without_running_ssh(
    server: SshServer, capsys: pytest.CaptureFixture[str]
) -> None:
    document = lab_json(capsys, "--hosts", "-oProxyCommand=touch /tmp/x,gpu-v100")

    bad, good = document["hosts"]
    assert bad["failure"]["kind"] == "bad-name"
    assert "not a host name" in bad["status"]
    assert good["state"] == "live"


def test_pick_hosts_prints_the_first_host_with_enough_free_cards(
    server: SshServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["pick", "-n", "2", "--format", "index", "--hosts", "gpu-dgx,gpu-mixed,gpu-v100"])

    assert code == 0
    assert capsys.readouterr().out == "gpu-v100 2,3\n"


def test_pick_hosts_says_why_each_host_has_not_enough(
    server: SshServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["pick", "-n", "3", "--hosts", "gpu-dgx,gpu-v100,gpu-closed"])

    err = capsys.readouterr().err
    assert code == 1
    assert "No host has 3 free GPUs:" in err
    assert "gpu-dgx: Asked for 3 free GPUs, but none is free." in err
    assert "gpu-v100: Asked for 3 free GPUs, but only 2 are free (GPUs 2, 3)." in err
    assert "gpu-closed: unreachable: connection refused" in err


def test_reduced_host_cards_with_unknown_owners_are_not_free(
    server: SshServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["pick", "-n", "1", "--json", "--hosts", REDUCED_ALIAS])

    picked = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (picked["host"], picked["uuids"]) == (REDUCED_ALIAS, [FAKE_UUID_1])


def test_run_hosts_launches_on_the_picked_host_pinned_to_its_free_card(
    server: SshServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "seen.txt"
    code = main(
        [
            "run",
            "--hosts",
            "gpu-dgx,gpu-mixed",
            "--auto",
            "1",
            "--json",
            "--",
            "sh",
            "-c",
            'echo "$CUDA_VISIBLE_DEVICES" > "$1"',
            "job-arg",
            str(out_file),
        ]
    )

    captured = capsys.readouterr()
    assert code == 0, captured.err
    job = json.loads(captured.out)
    assert "launching on gpu-mixed, GPUs 3" in captured.err
    assert job["gpus"] == [3]
    assert job["command"][-1] == str(out_file)
    with JobStore.open(server.state_dir("gpu-mixed")) as store:
        recorded = store.get(job["id"])
    assert recorded.env["CUDA_VISIBLE_DEVICES"] == job["uuids"][0]
    assert recorded.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_snapshot_stats_reports_bytes_per_second_per_host(
    server: SshServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["snapshot", "--hosts", "gpu-v100", "--stats"])

    err = capsys.readouterr().err
    assert code == 0
    found = re.search(r"stats: gpu-v100: (\d+) B/s on the wire", err)
    assert found, err
    rate = int(found.group(1))
    assert 500 < rate < 50_000


def test_link_goes_stale_when_the_server_hangs_and_live_when_it_resumes(
    server: SshServer, links: list[HostLink]
) -> None:
    link = open_link(links, "gpu-v100", stale_after_s=1.5)
    assert link.wait_for(is_live, WAIT_S)

    server.freeze(True)
    try:
        assert link.wait_for(lambda s: s.state is LinkState.STALE, WAIT_S)
        assert "stale for" in link.status().describe()
    finally:
        server.freeze(False)
    assert link.wait_for(is_live, WAIT_S)


def test_link_shows_the_host_unreachable_when_sshd_dies_and_reconnects_when_it_returns(
    server: SshServer, links: list[HostLink]
) -> None:
    link = open_link(links, "gpu-v100")
    assert link.wait_for(is_live, WAIT_S)
    before = link.status().snapshots_received

    server.kill()
    assert link.wait_for(
        lambda s: s.state is LinkState.UNREACHABLE and s.failure.kind == "refused", WAIT_S
    )
    assert link.status().snapshot is not None  # the last data stays for a person to see

    server.start()
    assert link.wait_for(lambda s: is_live(s) and s.snapshots_received > before + 1, WAIT_S)
    assert link.status().mode is Mode.FULL


def test_snapshot_hosts_watch_json_streams_a_lab_document_per_interval(server: SshServer) -> None:
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputop",
            "snapshot",
            "--hosts",
            "gpu-v100",
            "--watch",
            "0.3",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert watcher.stdout is not None
    try:
        states = []
        for _ in range(200):  # a document every 0.3 s: live well before the 60th second
            document = json.loads(watcher.stdout.readline())
            states.append(document["hosts"][0]["state"])
            if states[-1] == "live":
                break
    finally:
        watcher.send_signal(signal.SIGINT)
        exit_code = watcher.wait(30)
    assert states[-1] == "live"
    assert set(states) <= {"connecting", "live"}
    assert exit_code == 130  # ended by ctrl+c, as every command (128 + SIGINT)


def test_run_hosts_wait_launches_once_a_host_comes_back(
    server: SshServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.kill()
    outcome: list[int] = []
    launcher = threading.Thread(
        target=lambda: outcome.append(
            main(["run", "--hosts", "gpu-v100", "--auto", "2", "--wait", "--json", "--", "true"])
        )
    )
    launcher.start()
    seen = ""
    deadline = time.monotonic() + WAIT_S
    while "waiting until 2 GPUs are free" not in seen and time.monotonic() < deadline:
        seen += capsys.readouterr().err
        time.sleep(0.05)  # polling captured output for a condition, not a fixed wait
    assert "waiting until 2 GPUs are free on one of: gpu-v100" in seen

    server.start()
    launcher.join(WAIT_S + 30)
    assert outcome == [0]
    job = json.loads(capsys.readouterr().out)
    assert (job["gpus"], job["command"]) == ([2, 3], ["true"])


def test_a_link_asks_the_hosts_agent_for_its_history_through_ssh(
    server: SshServer, links: list[HostLink], tmp_path: Path
) -> None:
    from helpers.history import holders_scenario, record_stepped

    # the hour before the host's frozen clock (2026-01-01 00:00:30): a scenario an hour earlier
    scenario = Path(holders_scenario(tmp_path / "holders.json"))
    document = json.loads(scenario.read_text())
    document["start_time"] = 1767225600 - 3600
    scenario.write_text(json.dumps(document))
    store = server.state_dir("gpu-v100") / "history.sqlite3"
    record_stepped(str(scenario), store, 720)
    link = open_link(links, "gpu-v100")
    assert link.wait_for(lambda status: status.mode is Mode.FULL and is_live(status), WAIT_S)
    request = link.request_history(2 * 3600, by="user")
    assert request is not None
    answer = link.history_answer(request, WAIT_S)
    assert answer is not None and answer.error is None and answer.rows is not None
    assert answer.rows[0].key == "bob"
    assert abs(answer.rows[0].idle_held_seconds - 3600) <= 5
