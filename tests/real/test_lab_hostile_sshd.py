"""End to end: a host whose ``gputop`` prints absurd lines, over a real sshd, beside a
healthy host (tests/helpers/sshd.py). See docs/security.md, "A host's values"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.hostile import controls_left
from helpers.sshd import HOSTILE_ALIAS, NESTED_ALIAS, SshServer, start_server

from gputop.cli.main import main
from gputop.core.remote.transport import SSH_CONFIG_ENV

HOSTS = f"{HOSTILE_ALIAS},gpu-v100"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    started = start_server(tmp_path_factory.mktemp("sshd"))
    yield started
    started.kill()


@pytest.fixture(autouse=True)
def ssh_config(server: SshServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SSH_CONFIG_ENV, str(server.ssh_config))


def strict_loads(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_snapshot_hosts_shows_both_hosts_and_says_what_the_bad_one_sent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["snapshot", "--hosts", HOSTS])
    out = capsys.readouterr().out

    assert code == 0
    assert f"== {HOSTILE_ALIAS}: live, sent 8 impossible values (shown as N/A)" in out
    assert "== gpu-v100: live ==" in out and "[3] Tesla V100-SXM2-16GB" in out
    assert controls_left(out) == []
    for shown in ("nan", "inf W", "-400", "100000000000000000000"):
        assert shown not in out


def test_snapshot_hosts_json_is_strict_and_the_bad_values_are_null(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["snapshot", "--json", "--hosts", HOSTS])
    document = strict_loads(capsys.readouterr().out)

    assert code == 0
    bad, good = document["hosts"]
    gpu = bad["snapshot"]["gpus"][0]
    assert (gpu["power_w"], gpu["temperature_c"], gpu["utilization_gpu"]) == (None, None, None)
    assert bad["jobs"] == [{"id": 1, "gpus": []}]
    assert good["state"] == "live" and len(good["snapshot"]["gpus"]) == 4


def test_a_host_sending_a_nested_line_and_401_digits_is_live_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["snapshot", "--hosts", f"{NESTED_ALIAS},gpu-v100"])
    captured = capsys.readouterr()

    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    assert (
        f"== {NESTED_ALIAS}: live, sent 1 impossible value (shown as N/A), clock " in captured.out
    )
    assert "1 unreadable line (not JSON: nested too deeply" in captured.out
    assert "== gpu-v100: live ==" in captured.out
    assert "0" * 50 not in captured.out


def test_pick_hosts_goes_past_the_bad_host(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["pick", "-n", "2", "--hosts", HOSTS, "--json"])
    document = strict_loads(capsys.readouterr().out)

    assert code == 0
    assert document["host"] in (HOSTILE_ALIAS, "gpu-v100")
    assert len(document["uuids"]) == 2
